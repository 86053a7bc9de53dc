package gateway

import "testing"

// TestMatch: * is any run of characters; everything else is itself.
func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"read_file", "read_file", true},
		{"read_file", "read_files", false},
		{"read_*", "read_file", true},
		{"read_*", "read_", true},
		{"read_*", "write_file", false},
		{"*_file", "read_file", true},
		{"*", "anything", true},
		{"*file*", "a_file_b", true},
		{"a*a", "a", false},
		{"a*a", "aa", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "acb", false},
		{"*ab*b", "abab", true},
		{"*ab*b", "ab", false},
		{"read.*", "read_x", false},
	} {
		if got := Match(c.pattern, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

// TestSelected: tools narrows, deny_tools removes, deny wins.
func TestSelected(t *testing.T) {
	allow, deny := []string{"read_*", "list_*"}, []string{"*_secret*", "list_directory"}
	for name, want := range map[string]bool{
		"read_file": true, "list_allowed": true, "write_file": false,
		"read_secret_file": false, "list_directory": false,
	} {
		if got := Selected(allow, deny, name); got != want {
			t.Errorf("Selected(%q) = %v, want %v", name, got, want)
		}
	}
	if !Selected(nil, deny, "write_file") || Selected(nil, deny, "list_directory") {
		t.Error("no allow list: everything but the denied")
	}
}
