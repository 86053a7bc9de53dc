package confine

import (
	"strings"
	"testing"
)

// TestReadChildPID: the child pid is read from bubblewrap's info stream as
// far as it goes, whatever the blanks around the colon, and only there.
func TestReadChildPID(t *testing.T) {
	for in, want := range map[string]int{
		"{\n    \"child-pid\": 3839":              3839,
		"{\"child-pid\":12,\"cgroup-namespace\"":  12,
		"{\"child-pid\" \t:\n 7\n}":               7,
		"{\"x\": \"child-pid\", \"child-pid\": 5": 5,
	} {
		got, err := readChildPID(strings.NewReader(in))
		if err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "{\"child-pid\": x}", "{\"child-pid\" 5}", "{\"child_pid\": 5}"} {
		if got, err := readChildPID(strings.NewReader(in)); err == nil {
			t.Errorf("%q: %d, want an error", in, got)
		}
	}
}
