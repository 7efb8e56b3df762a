// timeprobe exercises Go's clocks and timers on simulated time: it prints
// what it sees, one line per check, for timeshim/tests/seccomp.rs.
// Usage: timeprobe [URL]  (URL answered by a server that takes real time).
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

func main() {
	start := time.Now()
	since := func() float64 { return time.Since(start).Seconds() }
	fmt.Printf("start %d\n", start.Unix())

	// First, an HTTP request slower than nothing but faster than its timeout:
	// with the clock frozen while we wait for I/O, the 5 s timeout never fires.
	if len(os.Args) > 1 {
		t3 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", os.Args[1], nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Printf("http error %v\n", err)
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Printf("http %d %q %.6f\n", resp.StatusCode, string(body), time.Since(t3).Seconds())
		}
		cancel()
	}

	time.Sleep(3600 * time.Second)
	fmt.Printf("sleep %.6f\n", since())

	// A ticker and a timer racing: 5 ticks of 1 s come before the 10 s timer.
	t0 := time.Now()
	tick := time.NewTicker(time.Second)
	timer := time.NewTimer(10 * time.Second)
	ticks := 0
loop:
	for {
		select {
		case <-tick.C:
			ticks++
			if ticks == 5 {
				fmt.Printf("ticks %d %.6f\n", ticks, time.Since(t0).Seconds())
			}
		case <-timer.C:
			break loop
		}
	}
	tick.Stop()
	fmt.Printf("timer %.6f ticks %d\n", time.Since(t0).Seconds(), ticks)

	// A context deadline.
	t1 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	<-ctx.Done()
	cancel()
	fmt.Printf("deadline %.6f %v\n", time.Since(t1).Seconds(), ctx.Err())

	// AfterFunc callbacks from several goroutines at distinct instants.
	var wg sync.WaitGroup
	var mu sync.Mutex
	t2 := time.Now()
	fired := []float64{}
	for _, d := range []int{3, 1, 2} {
		wg.Add(1)
		time.AfterFunc(time.Duration(d)*time.Second, func() {
			mu.Lock()
			fired = append(fired, time.Since(t2).Seconds())
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	fmt.Printf("afterfunc %v\n", fired)

	fmt.Printf("end %.6f\n", since())
}
