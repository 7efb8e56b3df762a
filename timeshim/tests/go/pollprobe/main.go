// pollprobe runs timers that are due off the millisecond, and prints, for
// each, the simulated microseconds since its start at which it ran.
//
// Go's poller waits for a timer in whole milliseconds rounded down, so on a
// real machine (and on the exact policy) each such timer costs two
// wake-ups: one before it is due, which finds nothing to do, and one a
// millisecond later, when it runs. The seccomp supervisor passes over the
// first when it can read the runtime's own deadline
// (timeshim/src/seccomp/supervisor.rs, go_poll_wait): the instants printed
// are the same with and without that, and the clock moves fewer times
// (timeshim/tests/seccomp.rs).
package main

import (
	"fmt"
	"time"
)

func main() {
	start := time.Now()
	since := func() int64 { return time.Since(start).Microseconds() }
	// A ticker of 1.5 ms: every other tick is due on the millisecond.
	t := time.NewTicker(1500 * time.Microsecond)
	var ticks []int64
	for i := 0; i < 40; i++ {
		<-t.C
		ticks = append(ticks, since())
	}
	t.Stop()
	fmt.Println("ticks", ticks)
	// Sleeps and a timer with odd nanoseconds, and one under a millisecond.
	var slept []int64
	for _, d := range []time.Duration{2345678, 999, 7000000, 10500001} {
		time.Sleep(d)
		slept = append(slept, since())
	}
	fmt.Println("slept", slept)
	done := make(chan int64)
	time.AfterFunc(3*time.Millisecond+1, func() { done <- since() })
	fmt.Println("afterfunc", <-done)
}
