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
)

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// ReadResult is read_file's structured result: the text (Content) and what
// the model needs to know about it. Some clients hand the model only the
// structured content, others only the text content (docs/tools.md, "The tools"):
// the text content is the same text, byte for byte, with nothing added, so
// either kind of client shows the model the file once.
type ReadResult struct {
	Path string `json:"path"`
	// Content is the requested lines, byte-exact (bytes that are not UTF-8
	// shown as \xNN, with NonUTF8 set); empty for a binary file or an
	// image (an image is the result's image content).
	Content    string `json:"content"`
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
    "path": {"type": "string"}, "content": {"type": "string", "description": "The requested lines, byte-exact; empty for binary files and images."},
    "size": {"type": "integer"}, "total_lines": {"type": "integer"},
    "offset": {"type": "integer"}, "lines": {"type": "integer"}, "more": {"type": "boolean"},
    "binary": {"type": "boolean"}, "non_utf8": {"type": "boolean"}, "mime_type": {"type": "string"}
  },
  "required": ["path", "content", "size", "total_lines", "offset", "lines", "more", "binary", "non_utf8"]
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
// readFileFacts are read_file's facts.
var readFileFacts = Facts{Name: "read_file", Approval: "read", Files: true}

func ReadFile(d Deps) Tool {
	tool := mcp.NewTool("read_file",
		mcp.WithDescription("Read a text file (optionally a range of lines), or an image. Binary and non-UTF-8 files are flagged, never silently altered."),
		schemas(readSchema, readOutputSchema),
		annotations("Read a file", true, false, true, false),
	)
	return d.tool(readFileFacts, tool, handler(d, readFileFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a readArgs) (*mcp.CallToolResult, error) {
		f, info, err := d.Files.OpenRead(a.Path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		res := ReadResult{Path: info.Display, Size: info.Size, Offset: max(a.Offset, 1)}
		ranged := a.Offset > 0 || a.Limit > 0
		if info.Size > d.Bounds.ReadBytes && !ranged {
			return nil, fmt.Errorf("%s is %d bytes, over the %d-byte cap; read a range with offset and limit", info.Display, info.Size, d.Bounds.ReadBytes)
		}
		head := make([]byte, 512)
		n, _ := io.ReadFull(f, head)
		head = head[:n]
		for _, im := range imageMagic {
			if len(head) >= im.at+len(im.magic) && bytes.Equal(head[im.at:im.at+len(im.magic)], im.magic) && (im.mime != "image/webp" || bytes.HasPrefix(head, []byte("RIFF"))) {
				if info.Size > d.Bounds.ReadBytes {
					return nil, fmt.Errorf("image %s is %d bytes, over the %d-byte cap", info.Display, info.Size, d.Bounds.ReadBytes)
				}
				rest, err := io.ReadAll(io.LimitReader(f, d.Bounds.ReadBytes))
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
		text, err := readLines(io.MultiReader(bytes.NewReader(head), f), info.Size, &res, a, d.Bounds.ReadBytes)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", info.Display, err)
		}
		if !utf8.ValidString(text) {
			res.NonUTF8 = true
			text = escapeInvalidUTF8(text)
		}
		res.Content = text
		return mcp.NewToolResultStructured(res, text), nil
	}))
}

// readLines counts every line and keeps the requested range byte-exact,
// at most capBytes of it. Files within the cap are read in one piece;
// larger ones (only with a range) are streamed.
func readLines(r io.Reader, size int64, res *ReadResult, a readArgs, capBytes int64) (string, error) {
	first := max(a.Offset, 1)
	if size <= capBytes {
		b, err := io.ReadAll(io.LimitReader(r, capBytes+1))
		if err != nil {
			return "", err
		}
		return selectLines(b, first, res, a, capBytes)
	}
	br := bufio.NewReaderSize(r, 64<<10)
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
	return finishLines(out.String(), line, first, res, a)
}

// selectLines is readLines over a whole file in memory.
func selectLines(b []byte, first int, res *ReadResult, a readArgs, capBytes int64) (string, error) {
	total := bytes.Count(b, []byte{'\n'})
	if len(b) > 0 && b[len(b)-1] != '\n' {
		total++
	}
	if first == 1 && (a.Limit == 0 || a.Limit >= total) {
		res.Lines = total
		return finishLines(string(b), total, first, res, a)
	}
	start, line := 0, 1
	for line < first && start < len(b) {
		i := bytes.IndexByte(b[start:], '\n')
		if i < 0 {
			start = len(b)
			break
		}
		start += i + 1
		line++
	}
	end := start
	for n := 0; end < len(b) && (a.Limit == 0 || n < a.Limit); n++ {
		i := bytes.IndexByte(b[end:], '\n')
		if i < 0 {
			end = len(b)
		} else {
			end += i + 1
		}
		res.Lines++
	}
	if int64(end-start) > capBytes {
		return "", fmt.Errorf("the requested range is over the %d-byte cap; ask for fewer lines", capBytes)
	}
	return finishLines(string(b[start:end]), total, first, res, a)
}

func finishLines(text string, total, first int, res *ReadResult, a readArgs) (string, error) {
	res.TotalLines = total
	res.More = a.Limit > 0 && first+a.Limit-1 < total
	if first > total && total > 0 {
		return "", fmt.Errorf("offset %d is past the end of the file (%d lines)", first, total)
	}
	return text, nil
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
