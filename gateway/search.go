package gateway

import (
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/mark3labs/mcp-go/mcp"
)

// Tool search (docs/gateway.md, "Tool search"): rather than every
// downstream tool's definition in every request, a session may list one
// find_tools tool and publish what it finds. Rank is its ranking: pure,
// over the definitions as published (NAME__TOOL, "[NAME] description").

// The bounds of one search's results.
const (
	// DefaultSearchResults is how many tools a search returns when the
	// query names no limit.
	DefaultSearchResults = 5
	// MaxSearchResults bounds the tools one search returns.
	MaxSearchResults = 20
	// MaxQueryBytes bounds a query.
	MaxQueryBytes = 500
)

// BM25's parameters, the usual ones.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// nameWeight counts each word of a tool's name this many times: a
	// name says most of what a tool does in the fewest words.
	nameWeight = 3
	// exactBonus puts a tool whose name is the whole query first.
	exactBonus = 1000
)

// stopWords are left out of queries and documents: words every
// description has, which would rank tools by their length.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"can": true, "do": true, "for": true, "from": true, "how": true, "i": true, "if": true, "in": true,
	"into": true, "is": true, "it": true, "its": true, "me": true, "my": true, "of": true, "on": true,
	"or": true, "that": true, "the": true, "this": true, "to": true, "tool": true, "use": true,
	"want": true, "what": true, "when": true, "which": true, "with": true, "you": true, "your": true,
}

// Rank returns the tools of ts that best match query, best first, at most
// limit (DefaultSearchResults when limit is 0 or less, never more than
// MaxSearchResults). The score is BM25 over the words of each tool's name
// (weighted: nameWeight), title and description, with stems so that
// "files" finds "file" and "reading" finds "read"; a tool whose name (with
// or without its server's prefix) is the whole query comes first. A tool
// that shares no word with the query is not returned. Ties keep name
// order, so a search's result does not depend on the order of ts.
func Rank(query string, ts []mcp.Tool, limit int) []mcp.Tool {
	if limit <= 0 {
		limit = DefaultSearchResults
	}
	limit = min(limit, MaxSearchResults)
	if len(query) > MaxQueryBytes {
		query = query[:MaxQueryBytes]
	}
	terms := uniq(words(query))
	exact := strings.ToLower(strings.TrimSpace(query))
	if len(terms) == 0 && exact == "" {
		return nil
	}
	docs := make([][]string, len(ts))
	total := 0
	df := map[string]int{}
	for i, t := range ts {
		docs[i] = document(t)
		total += len(docs[i])
		for _, w := range uniq(docs[i]) {
			df[w]++
		}
	}
	if len(ts) == 0 {
		return nil
	}
	avg := float64(total) / float64(len(ts))
	if avg == 0 {
		avg = 1
	}
	type scored struct {
		t     mcp.Tool
		score float64
	}
	var hits []scored
	n := float64(len(ts))
	for i, t := range ts {
		tf := map[string]int{}
		for _, w := range docs[i] {
			tf[w]++
		}
		score := 0.0
		for _, q := range terms {
			f := float64(tf[q])
			if f == 0 {
				continue
			}
			// The idf that stays positive (a word in every document
			// still counts a little).
			idf := math.Log(1 + (n-float64(df[q])+0.5)/(float64(df[q])+0.5))
			score += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(len(docs[i]))/avg))
		}
		name := strings.ToLower(t.Name)
		_, own, _ := strings.Cut(name, Sep)
		if exact != "" && (exact == name || exact == own) {
			score += exactBonus
		}
		if score > 0 {
			hits = append(hits, scored{t, score})
		}
	}
	slices.SortStableFunc(hits, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return strings.Compare(a.t.Name, b.t.Name)
	})
	out := make([]mcp.Tool, 0, min(limit, len(hits)))
	for _, h := range hits[:min(limit, len(hits))] {
		out = append(out, h.t)
	}
	return out
}

// document is the words a tool is found by: its name's (nameWeight
// times), its title's and its description's.
func document(t mcp.Tool) []string {
	var out []string
	name := words(t.Name)
	for range nameWeight {
		out = append(out, name...)
	}
	title := t.Title
	if title == "" && t.Annotations.Title != "" {
		title = t.Annotations.Title
	}
	out = append(out, words(title)...)
	return append(out, words(t.Description)...)
}

// words splits s into lower-case stems: runs of letters and digits,
// split again where camelCase changes case, without stop words.
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			w := stem(strings.ToLower(string(cur)))
			if len(w) > 1 && !stopWords[w] {
				out = append(out, w)
			}
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && unicode.IsLower(prev) {
				flush()
			}
			cur = append(cur, r)
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

// stem strips the commonest English endings, enough that a word and its
// plural or -ing form meet: "entities" and "entity", "files" and "file",
// "searches" and "search", "reading" and "read", "created" and "create".
// A stop word is returned as it is.
func stem(w string) string {
	if stopWords[w] || len(w) <= 3 {
		return w
	}
	// The plural first, then -ing or -ed: "strings" and "string" meet.
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "xes"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	}
	switch {
	case strings.HasSuffix(w, "ing") && len(w) > 5:
		w = w[:len(w)-3]
	case strings.HasSuffix(w, "ed") && len(w) > 4:
		w = w[:len(w)-2]
	}
	// A final e goes too, so that "write" meets "writing" ("writ").
	if strings.HasSuffix(w, "e") && len(w) > 3 {
		w = w[:len(w)-1]
	}
	return w
}

// uniq is ws without repeats, in first-seen order.
func uniq(ws []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range ws {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
