package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sync"
	"unicode/utf8"
)

// MaxMessageBytes bounds one JSON-RPC message read from stdio; a larger one
// is discarded as it streams in (memory stays bounded) and answered with an
// error.
const MaxMessageBytes = 16 << 20

// maxDepth bounds nesting in a message.
const maxDepth = 64

// guardedReader reads stdin for the stdio transport: each line is checked
// before the protocol library decodes it. Go's decoder keeps the last of
// duplicate keys and folds case, so {"path":"a","path":"/root/.ssh/x"}
// would reach a handler as whatever the library chose; here such a
// message, an oversized one, invalid UTF-8 or absurd nesting is answered
// with a JSON-RPC error and never passed on. The server keeps serving
// either way.
type guardedReader struct {
	in  *bufio.Reader
	out *syncWriter
	id  []byte // the id of the last oversized message, when found
}

func newGuardedReader(r io.Reader, w *syncWriter) *guardedReader {
	return &guardedReader{in: bufio.NewReaderSize(r, 64<<10), out: w}
}

// next returns the next line that passed the guard (nil for a refused or
// empty one), and the error that ended the input after it.
func (g *guardedReader) next() ([]byte, error) {
	line, tooBig, err := g.readLine()
	if len(line) == 0 && !tooBig {
		return nil, err
	}
	if msg := g.check(line, tooBig); msg != "" {
		g.reject(line, msg)
		return nil, err
	}
	return line, err
}

// readLine reads one line, keeping at most MaxMessageBytes of it. Past
// that it keeps a short prefix and streams the rest through an idScan, so
// the refusal can carry the request's id wherever in the message it stands
// (clients put it last as often as first).
func (g *guardedReader) readLine() ([]byte, bool, error) {
	var line []byte
	tooBig := false
	g.id = nil
	scan := idScan{key: "id"}
	for {
		chunk, err := g.in.ReadSlice('\n')
		switch {
		case tooBig:
			scan.feed(chunk)
		case len(line)+len(chunk) > MaxMessageBytes:
			tooBig = true
			scan.feed(line)
			scan.feed(chunk)
			line = line[:min(len(line), 4096)]
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooBig {
			g.id = scan.id
		}
		return bytes.TrimRight(line, "\r\n"), tooBig, err
	}
}

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

// check returns why a message is refused, or "".
func (g *guardedReader) check(line []byte, tooBig bool) string {
	if tooBig {
		return fmt.Sprintf("message larger than %d bytes", MaxMessageBytes)
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return ""
	}
	if !utf8.Valid(line) {
		return "message is not valid UTF-8"
	}
	if err := checkJSON(line); err != nil {
		return err.Error()
	}
	return ""
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

// reject answers a refused message with -32600 (invalid request), echoing
// its id when one can be read.
func (g *guardedReader) reject(line []byte, msg string) {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	id := json.RawMessage("null")
	if g.id != nil {
		id = g.id
	} else if json.Unmarshal(line, &probe) == nil {
		if len(probe.ID) > 0 && len(probe.ID) < 200 {
			id = probe.ID
		}
	} else if m := leadingID.FindSubmatch(line); m != nil {
		// A message cut short (too large): its id usually leads it.
		id = m[1]
	}
	resp, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error":   map[string]any{"code": -32600, "message": "invalid request: " + msg},
	})
	_, _ = g.out.Write(append(resp, '\n'))
}

// leadingID finds a top-level "id" before any nested object or array.
var leadingID = regexp.MustCompile(`^\s*\{[^{}\[\]]*?"id"\s*:\s*(-?[0-9]{1,18}|"(?:[^"\\]|\\.){0,100}")`)

// syncWriter serialises whole-message writes to stdout from mcp-go, the
// guard, the lane and the hub's notifications.
type syncWriter struct {
	mu sync.Mutex // guards w: one whole message at a time
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
