package server

import (
	"encoding/json"
	"testing"
)

// TestIDKey: integers and plain strings are the lane's; anything the
// library reads differently (a fraction, an exponent, an escape) is not.
func TestIDKey(t *testing.T) {
	for in, want := range map[string]bool{
		`7`: true, `-8`: true, `0`: true, `"seven"`: true, `""`: true,
		`7.0`: false, `1e3`: false, `"a\"b"`: false, `"\u0041"`: false, `-`: false, `null`: false,
		`true`: false, `{}`: false, ``: false, `"unterminated`: false, `--1`: false, `1-`: false,
	} {
		if _, ok := idKey(json.RawMessage(in)); ok != want {
			t.Errorf("idKey(%s) = %v, want %v", in, ok, want)
		}
	}
	a, _ := idKey(json.RawMessage(`7`))
	b, _ := idKey(json.RawMessage(`"7"`))
	if a == b {
		t.Errorf("7 and \"7\" share a key")
	}
}
