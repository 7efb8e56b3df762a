// randprobe prints what a Go program's randomness looks like: the global
// math/rand stream, a map's iteration order and crypto/rand bytes. Under
// `--seed` the three are the same on every run (timeshim/tests/seccomp.rs).
package main

import (
	crand "crypto/rand"
	"fmt"
	"math/rand"
)

func main() {
	fmt.Printf("math/rand %d %d\n", rand.Int63(), rand.Int63())
	m := map[int]bool{}
	for i := 0; i < 32; i++ {
		m[i] = true
	}
	order := []int{}
	for k := range m {
		order = append(order, k)
	}
	fmt.Printf("map %v\n", order)
	b := make([]byte, 8)
	if _, err := crand.Read(b); err != nil {
		fmt.Printf("crypto/rand error %v\n", err)
		return
	}
	fmt.Printf("crypto/rand %x\n", b)
}
