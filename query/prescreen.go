package query

import "strings"

// screen is what prescreen measures of a SQL text before PostgreSQL's
// parser sees it: lower bounds on what the limits count on the parse
// tree, and an upper bound on how deep that tree can be.
type screen struct {
	// alternatives and inValues are lower bounds on the alternatives of
	// the WHERE clause's normal form and the values of its largest IN
	// list.
	alternatives, inValues int64
	// nesting is an upper bound on the depth of the parse tree (see
	// nestingFrame).
	nesting int64
	// lexed is false when the text does not lex (the parser will say why);
	// the bounds then cover the text up to where lexing stopped.
	lexed bool
}

// subqueryWords begin a subquery where an IN list could begin.
var subqueryWords = map[string]bool{"SELECT": true, "VALUES": true, "WITH": true, "TABLE": true}

// prescreen reads the SQL text with a small lexer, before PostgreSQL's
// parser.
// Parsing costs time in proportion to the text, so a wide hostile query is
// refused here in microseconds instead; and the parser recurses on the C
// stack as deep as the tree it builds (about 350 bytes a level), where a
// crash ends the process, so a deep one must never reach it.
//
// The alternatives and IN bounds are sound without parsing because OR
// binds loosest: every OR at the WHERE clause's own parenthesis level
// (outside CASE ... END) joins a branch of the top-level disjunction, and
// each branch has at least one alternative; the items of an IN (...) at
// that level are at least its top-level commas plus one.
func prescreen(sql string) screen {
	l := lexer{s: sql}
	depth, caseDepth := 0, 0
	inWhere := false
	var cur int64 = 1 // alternatives of the WHERE clause being read
	sc := screen{alternatives: 1, lexed: true}
	var inGroup []int // depths of open IN lists, with their item counts in counts
	var counts []int64
	prevIN := false
	openedIN := false // the last token opened an IN group
	nest := []nestingFrame{{}}
	for {
		tok, kind, good := l.next()
		if !good {
			sc.lexed = false
			break
		}
		if kind == tokEOF {
			break
		}
		top := &nest[len(nest)-1]
		if openedIN {
			// IN (SELECT ...) is a subquery, not a list: no values.
			if n := len(inGroup); n > 0 && kind == tokWord && subqueryWords[strings.ToUpper(tok)] {
				inGroup, counts = inGroup[:n-1], counts[:n-1]
			}
			openedIN = false
		}
		switch kind {
		case tokOpen:
			nest = append(nest, nestingFrame{})
			depth++
			if inWhere && prevIN && depth == 1 {
				inGroup = append(inGroup, depth)
				counts = append(counts, 1)
				openedIN = true
			}
		case tokClose:
			// A CASE left open inside the parentheses ends with them (the
			// parser refuses the text; the bound stays sound).
			for len(nest) > 1 && nest[len(nest)-1].isCase {
				nest = closeFrame(nest)
			}
			if len(nest) > 1 {
				nest = closeFrame(nest)
			}
			if n := len(inGroup); n > 0 && inGroup[n-1] == depth {
				if counts[n-1] > sc.inValues {
					sc.inValues = counts[n-1]
				}
				inGroup, counts = inGroup[:n-1], counts[:n-1]
			}
			depth--
		case tokComma, tokSemicolon:
			top.item()
			if kind == tokComma {
				if n := len(inGroup); n > 0 && inGroup[n-1] == depth {
					counts[n-1]++
				}
			} else {
				inWhere = false
			}
		case tokOp:
			top.ops += int64(len(tok))
			if tok == "::" {
				top.ops-- // one typecast
			}
		case tokWord:
			word := strings.ToUpper(tok)
			switch word {
			case "AND", "OR", "WHEN", "THEN", "ELSE":
				top.item()
			case "CASE":
				nest = append(nest, nestingFrame{isCase: true})
			case "END":
				if top.isCase {
					nest = closeFrame(nest)
				}
			case "JOIN", "UNION", "INTERSECT", "EXCEPT":
				top.chain++
			default:
				if nestingWords[word] {
					top.ops++
				}
			}
			if depth != 0 {
				break
			}
			switch word {
			case "WHERE":
				// Another statement's or branch's WHERE: bounds are per clause.
				inWhere, cur = true, 1
			case "GROUP", "HAVING", "WINDOW", "ORDER", "LIMIT", "OFFSET", "FETCH", "FOR", "UNION", "INTERSECT", "EXCEPT", "RETURNING":
				inWhere = false
			case "CASE":
				caseDepth++
			case "END":
				if caseDepth > 0 {
					caseDepth--
				}
			case "OR":
				if inWhere && caseDepth == 0 {
					cur++
					if cur > sc.alternatives {
						sc.alternatives = cur
					}
				}
			}
		}
		prevIN = kind == tokWord && depth == 0 && strings.EqualFold(tok, "IN")
	}
	for len(nest) > 1 {
		nest = closeFrame(nest)
	}
	sc.nesting = nest[0].depth()
	return sc
}

// nestingFrame bounds the depth of the tree under one parenthesis (or
// bracket, or CASE ... END) level of the text, the text's top level being
// the first frame.
//
// Within one item of a level (between commas, ANDs and ORs, whose parser
// actions build flat lists: a AND b AND c is one node of three
// arguments), every operator token adds at most one level: a left- or
// right-associative chain of n operators is n deep, and a parenthesized
// group under it at most n deeper than the group's own depth. So an item
// is at most its operators plus its deepest group (or two, a column
// reference and its name) deep. JOIN and the set
// operations nest whole FROM items and statements (a JOIN b JOIN c is a
// join inside a join), so they count for the level as a whole, whatever
// the commas between them. A frame is one level more than its deepest
// item, plus two for the AND/OR lists above the items.
type nestingFrame struct {
	ops      int64 // operators in the current item
	maxChild int64 // depth of the deepest group in the current item
	best     int64 // depth of the deepest item before the current one
	chain    int64 // JOINs and set operations at this level
	isCase   bool
}

// item ends the current item of f. An operand without a group under it
// is at most two levels deep (a column reference and its name).
func (f *nestingFrame) item() {
	f.best = max(f.best, f.ops+max(f.maxChild, 2))
	f.ops, f.maxChild = 0, 0
}

func (f *nestingFrame) depth() int64 {
	f.item()
	return f.chain + f.best + 3
}

// closeFrame ends the innermost frame of nest, folding its depth into the
// one around it.
func closeFrame(nest []nestingFrame) []nestingFrame {
	d := nest[len(nest)-1].depth()
	nest = nest[:len(nest)-1]
	top := &nest[len(nest)-1]
	top.maxChild = max(top.maxChild, d)
	return nest
}

// nestingWords are the keywords that can add a level to an expression, as
// an operator does: NOT a, a IS NULL, a COLLATE c, a AT TIME ZONE z, a LIKE
// b, a BETWEEN b AND c, a IN (...), a OPERATOR(s.+) b, EXISTS (...), ANY
// (...), ARRAY[...], ROW(...). Counting one that does not nest only makes
// the bound looser.
var nestingWords = map[string]bool{
	"NOT": true, "IS": true, "ISNULL": true, "NOTNULL": true, "COLLATE": true, "AT": true,
	"LIKE": true, "ILIKE": true, "SIMILAR": true, "BETWEEN": true, "IN": true, "OPERATOR": true,
	"OVERLAPS": true, "ESCAPE": true, "ANY": true, "SOME": true, "ALL": true, "EXISTS": true,
	"ARRAY": true, "ROW": true, "UESCAPE": true,
}

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokWord
	tokOpen
	tokClose
	tokComma
	tokSemicolon
	tokOp // a run of operator characters (each may be an operator of its own), or "::"
	tokOther
)

// lexer splits SQL into the few token kinds prescreen needs, skipping
// strings, quoted identifiers, dollar-quoted text and comments as
// PostgreSQL's scanner does.
type lexer struct {
	s string
	i int
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// isOpChar reports whether c is one of the characters PostgreSQL's
// scanner builds operators of.
func isOpChar(c byte) bool { return strings.IndexByte("+-*/<>=~!@#%^&|`?", c) >= 0 }

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }

func (l *lexer) next() (string, tokKind, bool) {
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			l.i++
		case c == '-' && l.i+1 < len(l.s) && l.s[l.i+1] == '-':
			for l.i < len(l.s) && l.s[l.i] != '\n' {
				l.i++
			}
		case c == '/' && l.i+1 < len(l.s) && l.s[l.i+1] == '*':
			nest := 0
			for l.i < len(l.s) {
				if strings.HasPrefix(l.s[l.i:], "/*") {
					nest++
					l.i += 2
				} else if strings.HasPrefix(l.s[l.i:], "*/") {
					nest--
					l.i += 2
					if nest == 0 {
						break
					}
				} else {
					l.i++
				}
			}
			if nest != 0 {
				return "", tokEOF, false
			}
		case c == '\'':
			if !l.quoted('\'', false) {
				return "", tokEOF, false
			}
			return "", tokOther, true
		case c == '"':
			if !l.quoted('"', false) {
				return "", tokEOF, false
			}
			return "", tokOther, true
		case c == '$' && l.i+1 < len(l.s) && (l.s[l.i+1] == '$' || isIdentStart(l.s[l.i+1])):
			j := l.i + 1
			for j < len(l.s) && l.s[j] != '$' && isIdentChar(l.s[j]) {
				j++
			}
			if j >= len(l.s) || l.s[j] != '$' {
				l.i = j
				return "", tokOther, true
			}
			tag := l.s[l.i : j+1]
			end := strings.Index(l.s[j+1:], tag)
			if end < 0 {
				return "", tokEOF, false
			}
			l.i = j + 1 + end + len(tag)
			return "", tokOther, true
		case isIdentStart(c):
			j := l.i
			for j < len(l.s) && isIdentChar(l.s[j]) {
				j++
			}
			word := l.s[l.i:j]
			l.i = j
			// E'...' takes backslash escapes; B'', X'', N'', U&'' are plain.
			if l.i < len(l.s) && l.s[l.i] == '\'' && len(word) == 1 && (word[0] == 'E' || word[0] == 'e') {
				if !l.quoted('\'', true) {
					return "", tokEOF, false
				}
				return "", tokOther, true
			}
			return word, tokWord, true
		case c == '(' || c == '[':
			// Brackets nest like parentheses: an OR inside ARRAY[...]
			// or a subscript is not a branch of the WHERE clause.
			l.i++
			return string(c), tokOpen, true
		case c == ')' || c == ']':
			l.i++
			return string(c), tokClose, true
		case c == ',':
			l.i++
			return ",", tokComma, true
		case c == ';':
			l.i++
			return ";", tokSemicolon, true
		case c == ':' && l.i+1 < len(l.s) && l.s[l.i+1] == ':':
			l.i += 2
			return "::", tokOp, true
		case isOpChar(c):
			j := l.i
			for j < len(l.s) && isOpChar(l.s[j]) && !strings.HasPrefix(l.s[j:], "--") && !strings.HasPrefix(l.s[j:], "/*") {
				j++
			}
			op := l.s[l.i:j]
			l.i = j
			return op, tokOp, true
		default:
			l.i++
			return "", tokOther, true
		}
	}
	return "", tokEOF, true
}

// quoted skips a quoted string or identifier starting at l.i (doubled
// quotes escape it; with backslash, \x escapes too).
func (l *lexer) quoted(q byte, backslash bool) bool {
	l.i++
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case backslash && c == '\\':
			l.i += 2
		case c == q:
			if l.i+1 < len(l.s) && l.s[l.i+1] == q {
				l.i += 2
				continue
			}
			l.i++
			return true
		default:
			l.i++
		}
	}
	return false
}
