// Go twins of benches/channels.rs's workloads (issue 25): the same tasks as
// goroutines, the same channel capacities, the same message counts, and the
// same check of every value received. A message is one value through one
// channel, send to receive, as in the Rust bench.
//
//   - ping_pong: two goroutines, 10,000 round trips over two cap-1 channels
//     (20,000 messages);
//   - pipeline: a source, 6 forwarders that add 1 and a sink that sums,
//     joined by 7 cap-128 channels, 100,000 values (700,000 messages);
//   - fan_in: 64 producers x 1,000 values into one cap-128 channel (64,000);
//   - req_resp: 16 client/server pairs, each client sending 1,000 requests
//     over its pair's cap-1 request channel and awaiting each answer on a
//     cap-1 response channel before the next (32,000 messages).
//
// Each iteration starts its goroutines from the main goroutine and waits for
// their results, as each iteration of the Rust bench spawns its tasks from a
// root task; no warm-up run, as in the Rust bench's CHANNELS_ONCE mode. Usage (GOMAXPROCS as the worker count):
//
//	go build -o /tmp/go-channels benches/go/channels.go
//	GOMAXPROCS=2 /tmp/go-channels pipeline 5     # workload, iterations
//
// It prints one line per run like CHANNELS_ONCE:
// "pipeline go workers=2 iters=5 messages=3500000 wall=... (N ns/message)".
// Standard library only; benches/go_channels.sh runs it beside the Rust bench.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

const (
	pingRounds     = 10000
	pipeValues     = 100000
	pipeStages     = 8
	pipeCap        = 128
	fanProducers   = 64
	fanPerProducer = 1000
	fanCap         = 128
	reqPairs       = 16
	reqPerClient   = 1000
)

func tri(n uint64) uint64 { return n * (n - 1) / 2 }

// pingPong returns the messages it passed.
func pingPong() uint64 {
	ping := make(chan uint64, 1)
	pong := make(chan uint64, 1)
	done := make(chan uint64)
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(pong)
	}()
	go func() {
		var sum uint64
		for i := uint64(0); i < pingRounds; i++ {
			ping <- i
			v := <-pong
			if v != i+1 {
				panic("ping_pong: wrong answer")
			}
			sum += v
		}
		close(ping)
		done <- sum
	}()
	if got := <-done; got != tri(pingRounds)+pingRounds {
		panic("ping_pong: wrong sum")
	}
	return 2 * pingRounds
}

func pipeline() uint64 {
	first := make(chan uint64, pipeCap)
	rx := first
	for s := 0; s < pipeStages-2; s++ {
		next := make(chan uint64, pipeCap)
		go func(in <-chan uint64, out chan<- uint64) {
			for v := range in {
				out <- v + 1
			}
			close(out)
		}(rx, next)
		rx = next
	}
	done := make(chan uint64)
	go func(in <-chan uint64) {
		var sum uint64
		for v := range in {
			sum += v
		}
		done <- sum
	}(rx)
	go func() {
		for i := uint64(0); i < pipeValues; i++ {
			first <- i
		}
		close(first)
	}()
	want := tri(pipeValues) + (pipeStages-2)*pipeValues
	if got := <-done; got != want {
		panic("pipeline: wrong sum")
	}
	return (pipeStages - 1) * pipeValues
}

func fanIn() uint64 {
	ch := make(chan uint64, fanCap)
	var wg sync.WaitGroup
	for p := 0; p < fanProducers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(0); i < fanPerProducer; i++ {
				ch <- i
			}
		}()
	}
	done := make(chan uint64)
	go func() {
		var sum uint64
		for v := range ch {
			sum += v
		}
		done <- sum
	}()
	wg.Wait()
	close(ch)
	if got := <-done; got != fanProducers*tri(fanPerProducer) {
		panic("fan_in: wrong sum")
	}
	return fanProducers * fanPerProducer
}

func reqResp() uint64 {
	done := make(chan uint64, reqPairs)
	for p := 0; p < reqPairs; p++ {
		req := make(chan uint64, 1)
		resp := make(chan uint64, 1)
		go func() {
			for v := range req {
				resp <- 2 * v
			}
		}()
		go func() {
			var sum uint64
			for i := uint64(0); i < reqPerClient; i++ {
				req <- i
				sum += <-resp
			}
			close(req)
			done <- sum
		}()
	}
	for p := 0; p < reqPairs; p++ {
		if got := <-done; got != 2*tri(reqPerClient) {
			panic("req_resp: wrong sum")
		}
	}
	return 2 * reqPairs * reqPerClient
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: channels <ping_pong|pipeline|fan_in|req_resp> [iterations]")
		os.Exit(2)
	}
	workloads := map[string]func() uint64{
		"ping_pong": pingPong,
		"pipeline":  pipeline,
		"fan_in":    fanIn,
		"req_resp":  reqResp,
	}
	run, ok := workloads[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown workload %q\n", os.Args[1])
		os.Exit(2)
	}
	iters := 1
	if len(os.Args) > 2 {
		n, err := strconv.Atoi(os.Args[2])
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "iterations: %q is not a positive integer\n", os.Args[2])
			os.Exit(2)
		}
		iters = n
	}
	var msgs uint64
	t0 := time.Now()
	for i := 0; i < iters; i++ {
		msgs += run()
	}
	wall := time.Since(t0)
	fmt.Printf("%s go workers=%d iters=%d messages=%d wall=%.3fms (%.1f ns/message)\n",
		os.Args[1], runtime.GOMAXPROCS(0), iters, msgs,
		float64(wall.Nanoseconds())/1e6, float64(wall.Nanoseconds())/float64(msgs))
}
