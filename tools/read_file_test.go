package tools

import (
	"strings"
	"testing"
)

func TestReadLinesRanges(t *testing.T) {
	cases := []struct {
		in            string
		off, lim      int
		want          string
		total, lines  int
		more, wantErr bool
	}{
		{"a\nb\nc\n", 0, 0, "a\nb\nc\n", 3, 3, false, false},
		{"a\nb\nc", 0, 0, "a\nb\nc", 3, 3, false, false},
		{"a\r\nb\r\nc\r\n", 2, 1, "b\r\n", 3, 1, true, false},
		{"a\nb\nc\n", 3, 5, "c\n", 3, 1, false, false},
		{"a\nb\nc\n", 4, 0, "", 3, 0, false, true},
		{"", 0, 0, "", 0, 0, false, false},
		{"one line no newline", 1, 1, "one line no newline", 1, 1, false, false},
	}
	for _, c := range cases {
		for _, streamed := range []bool{false, true} {
			var res ReadResult
			size := int64(len(c.in))
			capB := int64(1 << 20)
			if streamed {
				size = capB + 1 // force the streaming path
			}
			got, err := readLines(strings.NewReader(c.in), size, &res, readArgs{Offset: c.off, Limit: c.lim}, capB)
			if (err != nil) != c.wantErr {
				t.Errorf("%q %d/%d streamed=%v: err %v", c.in, c.off, c.lim, streamed, err)
				continue
			}
			if err != nil {
				continue
			}
			if got != c.want || res.TotalLines != c.total || res.Lines != c.lines || res.More != c.more {
				t.Errorf("%q %d/%d streamed=%v: got %q total=%d lines=%d more=%v", c.in, c.off, c.lim, streamed, got, res.TotalLines, res.Lines, res.More)
			}
		}
	}
}
