package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// ReadResult is read_file's structured result. The text itself is the
// result's text content, never duplicated here.
type ReadResult struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	TotalLines int    `json:"total_lines"`
	Offset     int    `json:"offset"`
	Lines      int    `json:"lines"`
	More       bool   `json:"more"`
	Binary     bool   `json:"binary"`
	NonUTF8    bool   `json:"non_utf8"`
	MIMEType   string `json:"mime_type,omitempty"`
}

const readSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File to read, relative to the worktree or absolute."},
    "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)."},
    "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to return."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

const readOutputSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string"}, "size": {"type": "integer"}, "total_lines": {"type": "integer"},
    "offset": {"type": "integer"}, "lines": {"type": "integer"}, "more": {"type": "boolean"},
    "binary": {"type": "boolean"}, "non_utf8": {"type": "boolean"}, "mime_type": {"type": "string"}
  },
  "required": ["path", "size", "total_lines", "offset", "lines", "more", "binary", "non_utf8"]
}`

var imageMagic = []struct {
	mime  string
	magic []byte
	at    int
}{
	{"image/png", []byte("\x89PNG\r\n\x1a\n"), 0},
	{"image/jpeg", []byte{0xff, 0xd8, 0xff}, 0},
	{"image/gif", []byte("GIF8"), 0},
	{"image/webp", []byte("WEBP"), 8},
}

// ReadFile returns a file's text byte-exact (a line range of it, with the
// total line count), flags binary and non-UTF-8 content explicitly, and
// returns images as image content.
func ReadFile(d Deps) server.ServerTool {
	tool := mcp.NewTool("read_file",
		mcp.WithDescription("Read a text file (optionally a range of lines), or an image. Binary and non-UTF-8 files are flagged, never silently altered."),
		schemas(readSchema, readOutputSchema),
		annotations("Read a file", true, false, true, false),
	)
	return server.ServerTool{Tool: tool, Handler: handler(d, "read_file", func(ctx context.Context, req mcp.CallToolRequest, a readArgs) (*mcp.CallToolResult, error) {
		f, info, err := d.Files.OpenRead(a.Path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		res := ReadResult{Path: info.Display, Size: info.Size, Offset: max(a.Offset, 1)}
		ranged := a.Offset > 0 || a.Limit > 0
		if info.Size > d.Caps.ReadBytes && !ranged {
			return nil, fmt.Errorf("%s is %d bytes, over the %d-byte cap; read a range with offset and limit", info.Display, info.Size, d.Caps.ReadBytes)
		}
		head := make([]byte, 512)
		n, _ := io.ReadFull(f, head)
		head = head[:n]
		for _, im := range imageMagic {
			if len(head) >= im.at+len(im.magic) && bytes.Equal(head[im.at:im.at+len(im.magic)], im.magic) && (im.mime != "image/webp" || bytes.HasPrefix(head, []byte("RIFF"))) {
				if info.Size > d.Caps.ReadBytes {
					return nil, fmt.Errorf("image %s is %d bytes, over the %d-byte cap", info.Display, info.Size, d.Caps.ReadBytes)
				}
				rest, err := io.ReadAll(io.LimitReader(f, d.Caps.ReadBytes))
				if err != nil {
					return nil, fmt.Errorf("read %s: %w", info.Display, err)
				}
				res.MIMEType = im.mime
				res.Binary = true
				data := base64.StdEncoding.EncodeToString(append(head, rest...))
				r := mcp.NewToolResultStructured(res, "")
				r.Content = []mcp.Content{mcp.NewImageContent(data, im.mime)}
				return r, nil
			}
		}
		if bytes.IndexByte(head, 0) >= 0 {
			res.Binary = true
			return mcp.NewToolResultStructured(res, fmt.Sprintf("%s is a binary file (%d bytes); not shown as text.", info.Display, info.Size)), nil
		}
		text, err := readLines(io.MultiReader(bytes.NewReader(head), f), &res, a, d.Caps.ReadBytes)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", info.Display, err)
		}
		if !utf8.ValidString(text) {
			res.NonUTF8 = true
			text = escapeInvalidUTF8(text)
		}
		return mcp.NewToolResultStructured(res, text), nil
	})}
}

// readLines counts every line and keeps the requested range byte-exact,
// at most limit bytes of it. A NUL past the first 512 bytes still marks
// the file binary.
func readLines(r io.Reader, res *ReadResult, a readArgs, capBytes int64) (string, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	first := max(a.Offset, 1)
	var out strings.Builder
	line := 0
	for {
		s, err := br.ReadString('\n')
		if len(s) > 0 {
			line++
			if line >= first && (a.Limit == 0 || line < first+a.Limit) {
				if int64(out.Len()+len(s)) > capBytes {
					return "", fmt.Errorf("the requested range is over the %d-byte cap; ask for fewer lines", capBytes)
				}
				out.WriteString(s)
				res.Lines++
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
	}
	res.TotalLines = line
	res.More = a.Limit > 0 && first+a.Limit-1 < line
	if first > line && line > 0 {
		return "", fmt.Errorf("offset %d is past the end of the file (%d lines)", first, line)
	}
	return out.String(), nil
}

// escapeInvalidUTF8 shows every byte that is not valid UTF-8 as \xNN,
// rather than letting JSON encoding turn it silently into U+FFFD.
func escapeInvalidUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
			i++
			continue
		}
		b.WriteString(s[i : i+size])
		i += size
	}
	return b.String()
}
