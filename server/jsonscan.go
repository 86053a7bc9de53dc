package server

import (
	"encoding/json"
	"fmt"
	"slices"
)

// maxDepth bounds nesting in a message.
const maxDepth = 64

// The JSON scans every transport and the hub share: one top-level member
// read without decoding the message, and the duplicate-key and nesting
// check both transports apply before the protocol library decodes a
// message.

// idScan finds one top-level member (key: "id", "method") of a JSON-RPC
// message as its bytes stream past, keeping nothing else, and stops
// reading once it has it. A value that is not a number, a string of at
// most 200 bytes or null is ignored.
type idScan struct {
	key       string
	depth     int
	inStr     bool
	esc       bool
	expectKey bool   // the next string at depth 1 is a member name
	inKey     bool   // reading a member name at depth 1
	name      []byte // that name, up to 8 bytes
	keyLong   bool
	capturing bool // reading the value of the top-level "id"
	val       []byte
	id        []byte // the id found, nil for none
}

func (s *idScan) feed(p []byte) {
	for _, b := range p {
		if s.id != nil {
			return
		}
		s.step(b)
	}
}

// topLevel returns the raw value of the top-level member key of msg, nil
// when absent; it reads msg only up to that member.
func topLevel(msg []byte, key string) []byte {
	s := idScan{key: key}
	s.feed(msg)
	return s.id
}

func (s *idScan) step(b byte) {
	if s.id != nil {
		return
	}
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case b == '\\':
			s.esc = true
		case b == '"':
			s.inStr = false
		}
		if s.capturing {
			s.keep(b)
		}
		if s.inKey {
			if !s.inStr {
				s.inKey = false
			} else if len(s.name) < 8 {
				s.name = append(s.name, b)
			} else {
				s.keyLong = true
			}
		}
		return
	}
	switch b {
	case '"':
		s.inStr = true
		if s.depth == 1 && s.expectKey {
			s.inKey, s.expectKey, s.name, s.keyLong = true, false, s.name[:0], false
		} else if s.capturing {
			s.keep(b)
		}
	case '{', '[':
		s.depth++
		s.capturing = false // an object or array is no id
		s.expectKey = s.depth == 1 && b == '{'
	case '}', ']':
		if s.depth == 1 {
			s.finish()
		}
		s.depth--
	case ':':
		if s.depth == 1 && string(s.name) == s.key && !s.keyLong {
			s.capturing, s.val = true, s.val[:0]
		}
		s.name = s.name[:0]
	case ',':
		if s.depth == 1 {
			s.finish()
			s.expectKey = true
		}
	case ' ', '\t', '\r', '\n':
	default:
		if s.capturing {
			s.keep(b)
		}
	}
}

func (s *idScan) keep(b byte) {
	if len(s.val) > 200 {
		s.capturing = false
		return
	}
	s.val = append(s.val, b)
}

func (s *idScan) finish() {
	if !s.capturing {
		return
	}
	s.capturing = false
	v := s.val
	if len(v) == 0 {
		return
	}
	var probe any
	if json.Unmarshal(v, &probe) != nil {
		return
	}
	switch probe.(type) {
	case float64, string, nil:
		s.id = append([]byte(nil), v...)
	}
}

// checkJSON scans the message once, byte by byte: duplicate keys (compared
// exactly after unescaping, as the decoder will see them: no case folding)
// and nesting deeper than maxDepth are refused. Syntax errors are left to
// the protocol library, which answers them; the scan allocates only for
// the keys of each object.
func checkJSON(line []byte) error {
	type frame struct {
		obj, wantKey bool
		keys         []string
		many         map[string]struct{} // the keys, once there are more than 16
	}
	var stack []frame
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case '"':
			end, escaped := stringEnd(line, i+1)
			if end < 0 {
				return nil
			}
			if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
				f := &stack[n-1]
				key := string(line[i+1 : end])
				if escaped {
					if json.Unmarshal(line[i:end+1], &key) != nil {
						return nil
					}
				}
				dup := false
				if f.many != nil {
					_, dup = f.many[key]
					f.many[key] = struct{}{}
				} else {
					dup = slices.Contains(f.keys, key)
					f.keys = append(f.keys, key)
					if len(f.keys) > 16 {
						f.many = make(map[string]struct{}, 32)
						for _, k := range f.keys {
							f.many[k] = struct{}{}
						}
					}
				}
				if dup {
					return fmt.Errorf("duplicate key %q in a JSON object", key)
				}
				f.wantKey = false
			}
			i = end
		case '{', '[':
			if len(stack) >= maxDepth {
				return fmt.Errorf("message nested deeper than %d levels", maxDepth)
			}
			stack = append(stack, frame{obj: c == '{', wantKey: c == '{'})
		case '}', ']':
			if len(stack) == 0 {
				return nil
			}
			stack = stack[:len(stack)-1]
		case ',':
			if n := len(stack); n > 0 && stack[n-1].obj {
				stack[n-1].wantKey = true
			}
		}
	}
	return nil
}

// stringEnd returns the index of the quote closing the string whose body
// starts at line[i], -1 when it does not close, and whether it holds an
// escape.
func stringEnd(line []byte, i int) (int, bool) {
	escaped := false
	for ; i < len(line); i++ {
		switch line[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i, escaped
		}
	}
	return -1, escaped
}
