// interleave: eight goroutines on four threads append their letter to one
// slice, with work, channel operations and sleeps between appends; it prints
// a hash of the order, a map's iteration order, a math/rand draw and the
// first 40 letters. Under `--deterministic` the same seed gives the same line
// on every run (timeshim/tests/deterministic.rs).
package main

import (
	"fmt"
	"hash/fnv"
	"math/rand"
	"runtime"
	"sync"
	"time"
)

func main() {
	runtime.GOMAXPROCS(4)
	var mu sync.Mutex
	var order []byte
	var wg sync.WaitGroup
	ch := make(chan int, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			x := 0
			for i := 0; i < 300; i++ {
				for j := 0; j < (id+1)*2000; j++ {
					x += j
				}
				mu.Lock()
				order = append(order, byte('a'+id))
				mu.Unlock()
				if i%50 == 0 {
					time.Sleep(time.Millisecond)
				}
				select {
				case ch <- id:
				default:
				}
				select {
				case <-ch:
				default:
				}
			}
			_ = x
		}(g)
	}
	wg.Wait()
	m := map[int]int{}
	for i := 0; i < 20; i++ {
		m[i] = i
	}
	var keys []int
	for k := range m {
		keys = append(keys, k)
	}
	h := fnv.New64a()
	h.Write(order)
	fmt.Printf("%x %v %d %s\n", h.Sum64(), keys[:5], rand.Intn(1000), string(order[:40]))
}
