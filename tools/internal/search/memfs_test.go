package search

import (
	"errors"
	"io"
	"io/fs"
	"sort"
	"strings"
	"sync/atomic"
)

// memFS is an in-memory FS for table tests. Paths ending in "/" are
// directories, "name@" is a symlink, "name|" is a FIFO-like Other entry;
// anything else is a file with the given content. Parents are implied.
type memFS struct {
	kinds    map[string]Kind
	data     map[string]string
	opens    atomic.Int64
	readDirs atomic.Int64
}

func newMemFS(files map[string]string) *memFS {
	m := &memFS{kinds: map[string]Kind{"": Dir}, data: map[string]string{}}
	for p, content := range files {
		kind := File
		switch {
		case strings.HasSuffix(p, "/"):
			kind, p = Dir, strings.TrimSuffix(p, "/")
		case strings.HasSuffix(p, "@"):
			kind, p = Symlink, strings.TrimSuffix(p, "@")
		case strings.HasSuffix(p, "|"):
			kind, p = Other, strings.TrimSuffix(p, "|")
		}
		m.kinds[p] = kind
		if kind == File {
			m.data[p] = content
		}
		for d := p; strings.Contains(d, "/"); {
			d = d[:strings.LastIndexByte(d, '/')]
			m.kinds[d] = Dir
		}
	}
	return m
}

func memClean(rel string) string {
	rel = strings.TrimPrefix(rel, "./")
	if rel == "." {
		return ""
	}
	return rel
}

func (m *memFS) ReadDir(rel string, max int) ([]Entry, bool, error) {
	m.readDirs.Add(1)
	rel = memClean(rel)
	if k, ok := m.kinds[rel]; !ok {
		return nil, false, fs.ErrNotExist
	} else if k != Dir {
		return nil, false, errors.New("not a directory")
	}
	var out []Entry
	for p, k := range m.kinds {
		if p == "" {
			continue
		}
		dir, name := splitDir(p)
		if dir != rel {
			continue
		}
		out = append(out, Entry{Name: name, Kind: k, Size: int64(len(m.data[p]))})
	}
	// Reverse order: callers must sort.
	sort.Slice(out, func(i, j int) bool { return out[i].Name > out[j].Name })
	if len(out) > max {
		return out[:max], true, nil
	}
	return out, false, nil
}

func (m *memFS) Open(rel string) (io.ReadCloser, error) {
	m.opens.Add(1)
	rel = memClean(rel)
	if m.kinds[rel] != File {
		return nil, fs.ErrNotExist
	}
	return io.NopCloser(strings.NewReader(m.data[rel])), nil
}
