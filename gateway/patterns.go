package gateway

import "strings"

// Match says whether name matches pattern, in which * stands for any run
// of characters (none included) and every other character for itself.
// Patterns are matched against a server's own tool names, without the
// SERVER__ prefix (docs/gateway.md, "Which tools are published").
func Match(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(name, p)
		if i < 0 {
			return false
		}
		name = name[i+len(p):]
	}
	return strings.HasSuffix(name, last)
}

// Selected says whether a server publishes its tool name: it matches one
// of allow (or allow is empty) and none of deny. Deny wins.
func Selected(allow, deny []string, name string) bool {
	for _, p := range deny {
		if Match(p, name) {
			return false
		}
	}
	if len(allow) == 0 {
		return true
	}
	for _, p := range allow {
		if Match(p, name) {
			return true
		}
	}
	return false
}
