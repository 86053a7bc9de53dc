package gateway

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// realTools are the tools three real servers list (testdata/tools-list.json:
// @modelcontextprotocol/server-filesystem, -memory and -everything, as
// their tools/list answered), published as the gateway publishes them.
func realTools(t *testing.T) []mcp.Tool {
	t.Helper()
	data, err := os.ReadFile("testdata/tools-list.json")
	if err != nil {
		t.Fatal(err)
	}
	var bySrv map[string][]mcp.Tool
	if err := json.Unmarshal(data, &bySrv); err != nil {
		t.Fatal(err)
	}
	var out []mcp.Tool
	for _, srv := range []string{"files", "memory", "everything"} {
		for _, tl := range bySrv[srv] {
			tl.Name = srv + Sep + tl.Name
			tl.Description = "[" + srv + "] " + tl.Description
			out = append(out, tl)
		}
	}
	if len(out) < 30 {
		t.Fatalf("%d tools in testdata", len(out))
	}
	return out
}

func names(ts []mcp.Tool) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// TestRank: queries a model would write find the tool meant, first (or
// among the first few where the query fits several), over the real
// definitions of three servers; a query sharing no word with any tool
// finds nothing; the limit bounds the result.
func TestRank(t *testing.T) {
	ts := realTools(t)
	for _, tc := range []struct {
		query string
		first string   // the best hit
		among []string // or: each of these in the result
		limit int
	}{
		{query: "read a text file", first: "files__read_text_file"},
		{query: "create entities in the knowledge graph", first: "memory__create_entities"},
		{query: "add observations", first: "memory__add_observations"},
		{query: "directory tree", first: "files__directory_tree"},
		{query: "sum of two numbers", first: "everything__get-sum"},
		{query: "environment variables", first: "everything__get-env"},
		{query: "move or rename a file", first: "files__move_file"},
		{query: "search nodes", first: "memory__search_nodes"},
		{query: "compress with gzip", first: "everything__gzip-file-as-resource"},
		// camelCase and plurals: "Entities" meets "entity".
		{query: "deleteEntity", first: "memory__delete_entities"},
		// The name itself, with or without the prefix: first whatever
		// else matches.
		{query: "get_file_info", first: "files__get_file_info"},
		{query: "memory__read_graph", first: "memory__read_graph"},
		{query: "echo", first: "everything__echo"},
		{query: "list directories", among: []string{"files__list_directory", "files__list_directory_with_sizes", "files__list_allowed_directories"}, limit: 5},
		{query: "delete", among: []string{"memory__delete_entities", "memory__delete_observations", "memory__delete_relations"}, limit: 3},
	} {
		got := Rank(tc.query, ts, tc.limit)
		gn := names(got)
		if tc.first != "" && (len(gn) == 0 || gn[0] != tc.first) {
			t.Errorf("Rank(%q) = %v, want %s first", tc.query, gn, tc.first)
		}
		for _, w := range tc.among {
			if !slices.Contains(gn, w) {
				t.Errorf("Rank(%q, limit %d) = %v, want %s among them", tc.query, tc.limit, gn, w)
			}
		}
	}
	if got := Rank("zebra quantum", ts, 0); len(got) != 0 {
		t.Errorf("a query matching nothing found %v", names(got))
	}
	if got := Rank("the a of", ts, 0); len(got) != 0 {
		t.Errorf("a query of stop words found %v", names(got))
	}
	if got := Rank("file", ts, 0); len(got) != DefaultSearchResults {
		t.Errorf("the default limit gave %d tools, want %d", len(got), DefaultSearchResults)
	}
	if got := Rank("file directory entity graph", ts, 1000); len(got) > MaxSearchResults {
		t.Errorf("limit 1000 gave %d tools, more than %d", len(got), MaxSearchResults)
	}
	// The result does not depend on the order of the tools.
	rev := slices.Clone(ts)
	slices.Reverse(rev)
	if a, b := names(Rank("file", ts, 20)), names(Rank("file", rev, 20)); !slices.Equal(a, b) {
		t.Errorf("order-dependent ranking:\n %v\n %v", a, b)
	}
}

// TestStem: a word and its plural, -ing and -ed forms meet.
func TestStem(t *testing.T) {
	for _, group := range [][]string{
		{"file", "files"},
		{"entity", "entities"},
		{"search", "searches", "searching", "searched"},
		{"read", "reading", "reads"},
		{"write", "writing", "writes"},
		{"create", "created", "creating", "creates"},
		{"directory", "directories"},
		{"string", "strings"},
		{"process", "processes", "processed"},
	} {
		for _, w := range group[1:] {
			if stem(w) != stem(group[0]) {
				t.Errorf("stem(%q) = %q, stem(%q) = %q", w, stem(w), group[0], stem(group[0]))
			}
		}
	}
	if got := words("readTextFile get-sum list_allowed_directories"); !slices.Equal(got, []string{"read", "text", "fil", "get", "sum", "list", "allow", "directory"}) {
		t.Errorf("words: %v", got)
	}
}
