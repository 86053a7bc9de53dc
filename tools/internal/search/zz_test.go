package search

import "testing"

func BenchmarkZZGlob(b *testing.B) {
	src := goSrc(b)
	for b.Loop() {
		r, err := Glob(NewOSFS(src), "**", GlobOptions{Limit: 1 << 20, Hidden: true})
		if err != nil || len(r.Paths) < 1000 { b.Fatal(err, len(r.Paths)) }
	}
}

func BenchmarkZZReadOnly(b *testing.B) {
	src := goSrc(b)
	fsys := NewOSFS(src)
	r, _ := Glob(fsys, "**", GlobOptions{Limit: 1 << 20, Hidden: true})
	paths := r.Paths
	b.ResetTimer()
	for b.Loop() {
		ch := make(chan string, 64)
		done := make(chan int)
		for range 2 {
			go func() {
				buf := make([]byte, 0, 1<<20)
				n := 0
				for p := range ch {
					f, err := fsys.Open(p)
					if err != nil { continue }
					d, _, _ := readFile(f, -1, 10<<20, buf[:0])
					f.Close()
					buf = d[:0]
					if bytesIndex(d) { n++ }
				}
				done <- n
			}()
		}
		for _, p := range paths { ch <- p }
		close(ch)
		<-done; <-done
	}
}
