// gcprobe sleeps ten idle minutes in 30-second steps with a heap to
// collect, then prints how many collections the runtime forced (sysmon's
// one after two minutes without any: the idle minutes' collections). Under `--shim seccomp` the launcher
// turns the forced collection off (timeshim/src/seccomp/gort.rs), and the
// program's idle sysmon sleeps until its next timer: "idle collections 0"
// (timeshim/tests/seccomp.rs).
package main

import (
	"fmt"
	"runtime"
	"time"
)

var keep [][]byte

func main() {
	for i := 0; i < 4096; i++ {
		keep = append(keep, make([]byte, 1024))
	}
	// A first collection: the runtime forces one only after another ran.
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.NumGC
	start := time.Now()
	for i := 0; i < 20; i++ {
		time.Sleep(30 * time.Second)
	}
	runtime.ReadMemStats(&m)
	fmt.Printf("slept %.0f\n", time.Since(start).Seconds())
	fmt.Printf("idle collections %d\n", m.NumGC-before)
	fmt.Printf("heap %d\n", len(keep))
}
