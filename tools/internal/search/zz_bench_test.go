package search

import ("context";"testing";"os")

func BenchmarkZZ(b *testing.B) {
	src := "/usr/local/go/src"
	cases := []GrepOptions{
		{Pattern: "func main", IgnoreCase: true},
		{Pattern: `func \w+\(`},
		{Pattern: `\bNewReader\b`},
		{Pattern: `[A-Z]+_SUFFIX`},
		{Pattern: `foo|bar`},
	}
	_ = os.Stdout
	for _, o := range cases {
		o.OutputMode = ModeCount; o.Limit = 100000
		b.Run(o.Pattern, func(b *testing.B) {
			for b.Loop() {
				if _, err := Grep(context.Background(), NewOSFS(src), o); err != nil { b.Fatal(err) }
			}
		})
	}
}
