// Package textedit holds the pure text engines behind edit_file and
// apply_patch: exact-text edits, a unified diff renderer, and a parser and
// applier for two patch formats. Nothing here touches the file system; the
// tool layer reads the files, calls these functions, and writes the results
// atomically.
//
// # Edits
//
// ApplyEdits applies a list of {OldText, NewText, ReplaceAll} edits in order,
// each to the result of the previous one, all or nothing. An empty OldText is
// an error. Each OldText is located at the first of three levels that finds
// it at all:
//
//  0. exact: byte for byte (an occurrence that would split a "\r\n" of
//     the file does not count).
//  1. line endings: "\r\n" and "\n" compared alike (a CRLF file edited with
//     LF text, or the reverse). A match never splits a "\r\n".
//  2. indentation: OldText (with a trailing "\n" meaning "through the end of
//     the last line") must equal whole lines of the file once the leading
//     spaces and tabs of every line are set aside; blank old lines match
//     blank file lines; the rest of each line, trailing white space included,
//     must be equal; and one column offset must turn the indentation of
//     every non-blank old line into that of its file line, measuring tabs
//     with a tab width of 4, else 8, else 2 (the first that fits; irrelevant
//     when neither side has tabs). NewText is then re-indented line by line:
//     a line whose leading white space equals that of some old line (the
//     first such) takes the indentation of that old line's file line; any
//     other non-blank line is moved by the offset (never below column 0) and
//     written with tabs (width as found, then spaces) if the matched file
//     lines indent with tabs, else with spaces, else (no indentation in the
//     matched lines) in the line's own style. Blank NewText lines are kept.
//
// At the level that finds it, OldText must occur exactly once (overlapping
// occurrences count), unless ReplaceAll, which replaces every
// non-overlapping occurrence from the left. Zero occurrences is an
// EditNotFound error quoting the start of OldText and the best partial
// match; more than one is an EditAmbiguous error with the count and the
// lines. NewText is always written in the file's line-ending convention: the
// majority ending of the original content (CRLF when more lines end in
// "\r\n" than in "\n"; on a tie, the first line's ending); in a file without
// any line ending, NewText is made consistent with its own majority. So an
// edit can never mix CRLF into an LF file or the reverse, and edit_file
// cannot change a file's line endings (write_file can).
//
// # Unified diffs
//
// UnifiedDiff renders diff -u output (see its documentation). Lines are
// compared with their endings, so a CRLF-only change shows as a change and
// the diff's lines carry their "\r"; ParsePatch and ApplyOp reproduce such a
// diff byte for byte.
//
// # Patches
//
// ParsePatch accepts two formats and returns one FileOp per file (Add,
// Delete, or Update with an optional MoveTo). Every path goes through
// ValidatePath, a patch touching one path twice (including as a move
// target) is refused, and so is a patch containing a NUL byte. Errors are
// *ParseError with the 1-based patch line.
//
// The envelope (OpenAI Codex's apply_patch format):
//
//	*** Begin Patch
//	*** Add File: path        then lines each starting with '+'
//	*** Delete File: path
//	*** Update File: path
//	*** Move to: path         optional, right after Update File
//	@@ <anchor line>          or a bare @@; the first chunk may omit it
//	 context / -removed / +added lines
//	*** End of File           optional: the chunk must match at the end
//	*** End Patch
//
// Marker lines may have trailing white space (outside chunks, leading too);
// the last line may lack its newline; a Markdown fence (even unclosed) or an
// "apply_patch <<'EOF'" here-document around the whole patch is removed;
// other text before "*** Begin Patch" is an error.
// Stacked "@@ a" / "@@ b" lines are anchors sought one after the other. A
// unified-style "@@ -1,2 +1,3 @@" line inside an envelope is a bare @@. A
// completely empty line inside a chunk is an empty context line (blank lines
// at the end of a chunk are dropped), and inside an Add File an empty line
// followed by more '+' lines is an empty content line. An added file's
// content is its lines each followed by "\n".
//
// Unified diffs (diff -u, git diff): optional "diff --git" headers with
// their extended lines (new/deleted file mode, rename from/to, index, mode
// and similarity lines are read; mode changes alone are dropped; copies and
// binary patches are refused); "--- old" / "+++ new" (a tab and what follows,
// diff's time stamp, is cut; git's quoted names are unquoted; "a/" and "b/"
// are stripped as a pair, or one of them when that makes the names equal;
// /dev/null means the file is added or deleted); "@@ -l,s +l,s @@" hunks; any
// number of files; "\ No newline at end of file". Text outside sections
// (commit messages, "Index:" lines, a format-patch signature) is skipped.
// Without git rename lines, --- and +++ must name the same file. Hunk counts
// are hints: a hunk ends where its counts are met unless the next line still
// carries a ' ', '-' or '+' prefix (and is not a new ---/+++ header), and it
// ends early at a line that cannot belong to it; a bare "@@" without numbers
// is accepted too. The heading text after the second "@@" is ignored.
//
// # Applying chunks
//
// ApplyOp applies an Update's chunks in order. A chunk's old lines (context
// and removed) are sought at or after the end of the previous chunk; its
// anchors, if any, first, each at or after the previous one, after which the
// old lines are sought from the last anchor line on. An envelope chunk takes
// the first place that matches; a unified hunk takes the place its header
// names (shifted by the offset the previous hunk was found at) when it
// matches there, else the nearest place. A chunk marked *** End of File must
// match at the very end. A pure addition (only '+' lines) goes after the
// last anchor, else at the place a unified header names, else at the end of
// the file (so chunks after such an addition can only be further pure
// additions at the end). Each place is sought at the fuzz levels in order,
// every place at one level before the next level:
//
//	FuzzNone          equal lines, a trailing "\r" aside on both sides: CRLF
//	                  and LF are not a difference (a CRLF file patched with
//	                  LF lines, or the reverse, applies at FuzzNone)
//	FuzzTrailingSpace trailing white space ignored
//	FuzzSpace         leading and trailing white space ignored
//
// ApplyOpDetailed reports the level and the place of each chunk. Context
// lines keep the file's text; only removed lines go and added lines come.
// Added lines are copied as written (a "\r" included) when the chunk's old
// lines equal the file's byte for byte and cover at least one line ending,
// since then the patch shows which ending it means; otherwise, and for pure
// additions, they are written in the file's majority line ending. So an LF
// patch keeps a CRLF file CRLF, and a diff made by UnifiedDiff reproduces
// even line-ending changes exactly. An
// unapplicable chunk is an *ApplyError naming the chunk and its patch line
// and quoting the first of its lines that could not be matched, with what
// the file has there; a chunk whose lines only occur before the previous
// chunk is reported as out of order.
//
// Final newline: an envelope Update keeps the file's state (a file without a
// final newline still has none, whatever its new last line; an empty file
// gains lines ending in one). A unified hunk that reaches the end of the
// file sets it from its last new line's "\ No newline at end of file"
// marker; otherwise it is kept. A line that stops being last gains the
// file's line ending; a CRLF line that becomes the unterminated last line
// loses its "\r" with its "\n".
//
// Both engines are fuzzed: FuzzParsePatch, FuzzApplyEdits and
// FuzzUnifiedDiffRoundTrip in the tests.
package textedit
