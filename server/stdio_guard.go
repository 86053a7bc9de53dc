package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"
	"unicode/utf8"
)

// MaxMessageBytes bounds one JSON-RPC message read from stdio; a larger one
// is discarded as it streams in (memory stays bounded) and answered with an
// error.
const MaxMessageBytes = 16 << 20

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
