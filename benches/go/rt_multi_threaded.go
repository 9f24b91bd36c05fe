// Go twins of benches/rt_multi_threaded.rs's workloads (issue 39; the
// workloads are described in benches/common/mod.rs): the same tasks as
// goroutines, the same counts, the same checks.
//
//   - spawn_many_local: the main goroutine starts 10,000 goroutines that each
//     decrement a shared counter; the one that reaches zero sends on a cap-1
//     channel, which main waits for;
//   - spawn_many_remote_idle: 10,000 empty goroutines, each with its own
//     "join handle" (a channel it closes as it ends), then main awaits every
//     handle in order. Go has no thread outside the scheduler, so "remote"
//     is the same spawn as the local one plus the join handle;
//   - spawn_many_remote_busy1: the same while 8 background goroutines loop
//     `runtime.Gosched(); spin 10 µs` (started before timing);
//   - yield_many: 200 goroutines each calling runtime.Gosched() 1,000 times,
//     then sending on a cap-200 channel; main receives 200;
//   - ping_pong: one goroutine starts 1,000 goroutines; each makes two cap-1
//     channels (the oneshots) and a partner goroutine, sends a ping and
//     awaits the pong; the last to finish reports on a cap-1 channel;
//   - chained_spawn: a chain of 1,000 goroutines, each starting the next; the
//     last sends the chain's length on a cap-1 channel.
//
// Usage (GOMAXPROCS as the worker count; N, optional, replaces the workload's
// count: spawns, pings, chain length or yielding goroutines, for the
// Ir(N) - Ir(N/2) differences of benches/go_rt_multi_threaded.sh):
//
//	go build -o /tmp/go-rt rt_multi_threaded.go
//	GOMAXPROCS=2 /tmp/go-rt spawn_many_local 100     # workload, iterations[, N]
//
// One untimed warm-up iteration runs first (the Rust side is timed by
// criterion after its warm-up); WARMUP=0 leaves it out. It prints one line:
// "spawn_many_local go workers=2 n=10000 iters=100 wall=...ms (N µs/iter)".
// Standard library only.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
)

const (
	spawnTasks    = 10000
	busyTasks     = 8
	stall         = 10 * time.Microsecond
	yieldTasks    = 200
	yieldsPerTask = 1000
	pings         = 1000
	chain         = 1000
)

func spawnManyLocal(n int) {
	done := make(chan struct{}, 1)
	var left int64 = int64(n)
	for i := 0; i < n; i++ {
		go func() {
			if atomic.AddInt64(&left, -1) == 0 {
				done <- struct{}{}
			}
		}()
	}
	<-done
	if atomic.LoadInt64(&left) != 0 {
		panic("spawn_many_local: tasks left")
	}
}

func spawnRemoteAndJoin(n int) {
	handles := make([]chan struct{}, 0, n)
	for i := 0; i < n; i++ {
		h := make(chan struct{})
		handles = append(handles, h)
		go func() { close(h) }()
	}
	joined := 0
	for _, h := range handles {
		<-h
		joined++
	}
	if joined != n {
		panic("spawn_many_remote: not all joined")
	}
}

// backgroundLoad starts the 8 spinning goroutines of spawn_many_remote_busy1
// and returns once they all run; storing 0 in the flag stops them.
func backgroundLoad() *int32 {
	running := new(int32)
	*running = 1
	var started int32
	for i := 0; i < busyTasks; i++ {
		go func() {
			atomic.AddInt32(&started, 1)
			for atomic.LoadInt32(running) == 1 {
				runtime.Gosched()
				t := time.Now()
				for time.Since(t) < stall {
				}
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for atomic.LoadInt32(&started) < busyTasks {
		if time.Now().After(deadline) {
			panic("the background goroutines did not start within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	return running
}

func yieldMany(n int) {
	done := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		go func() {
			for y := 0; y < yieldsPerTask; y++ {
				runtime.Gosched()
			}
			done <- struct{}{}
		}()
	}
	for i := 0; i < n; i++ {
		<-done
	}
}

func pingPong(n int) {
	done := make(chan struct{}, 1)
	var left int64 = int64(n)
	go func() {
		for i := 0; i < n; i++ {
			go func() {
				ping := make(chan struct{}, 1)
				pong := make(chan struct{}, 1)
				go func() {
					<-ping
					pong <- struct{}{}
				}()
				ping <- struct{}{}
				<-pong
				if atomic.AddInt64(&left, -1) == 0 {
					done <- struct{}{}
				}
			}()
		}
	}()
	<-done
	if atomic.LoadInt64(&left) != 0 {
		panic("ping_pong: tasks left")
	}
}

func chainLink(n int, done chan<- int, hop int) {
	if hop == n {
		done <- hop
	} else {
		go chainLink(n, done, hop+1)
	}
}

func chainedSpawn(n int) {
	done := make(chan int, 1)
	go chainLink(n, done, 0)
	if got := <-done; got != n {
		panic("chained_spawn: wrong length")
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rt_multi_threaded <spawn_many_local|spawn_many_remote_idle|"+
			"spawn_many_remote_busy1|yield_many|ping_pong|chained_spawn> [iterations [n]]")
		os.Exit(2)
	}
	type workload struct {
		run func(int)
		n   int
	}
	workloads := map[string]workload{
		"spawn_many_local":        {spawnManyLocal, spawnTasks},
		"spawn_many_remote_idle":  {spawnRemoteAndJoin, spawnTasks},
		"spawn_many_remote_busy1": {spawnRemoteAndJoin, spawnTasks},
		"yield_many":              {yieldMany, yieldTasks},
		"ping_pong":               {pingPong, pings},
		"chained_spawn":           {chainedSpawn, chain},
	}
	w, ok := workloads[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown workload %q\n", os.Args[1])
		os.Exit(2)
	}
	positive := func(i int, what string, dflt int) int {
		if len(os.Args) <= i {
			return dflt
		}
		v, err := strconv.Atoi(os.Args[i])
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "%s: %q is not a positive integer\n", what, os.Args[i])
			os.Exit(2)
		}
		return v
	}
	iters := positive(2, "iterations", 1)
	n := positive(3, "n", w.n)
	if os.Args[1] == "spawn_many_remote_busy1" {
		running := backgroundLoad()
		defer atomic.StoreInt32(running, 0)
	}
	if os.Getenv("WARMUP") != "0" {
		w.run(n)
	}
	t0 := time.Now()
	for i := 0; i < iters; i++ {
		w.run(n)
	}
	wall := time.Since(t0)
	fmt.Printf("%s go workers=%d n=%d iters=%d wall=%.3fms (%.1f µs/iter)\n",
		os.Args[1], runtime.GOMAXPROCS(0), n, iters,
		float64(wall.Nanoseconds())/1e6, float64(wall.Nanoseconds())/1e3/float64(iters))
}
