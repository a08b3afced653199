package query

import "strings"

// prescreen reads the SQL text with a small lexer, before PostgreSQL's
// parser, and returns lower bounds on two things the limits measure: the
// alternatives of the WHERE clause's normal form and the values of its
// largest IN list.
// Parsing costs time in proportion to the text, so a wide hostile query is
// refused here in microseconds instead.
//
// Both bounds are sound without parsing because OR binds loosest: every OR
// at the WHERE clause's own parenthesis level (outside CASE ... END) joins
// a branch of the top-level disjunction, and each branch has at least one
// alternative; the items of an IN (...) at that level are at least its
// top-level commas plus one. ok is false when the text does not lex (the
// parser will say why).
func prescreen(sql string) (alternatives, inValues int64, ok bool) {
	l := lexer{s: sql}
	depth, caseDepth := 0, 0
	inWhere := false
	var cur int64 = 1 // alternatives of the WHERE clause being read
	alternatives = 1
	var inGroup []int // depths of open IN lists, with their item counts in counts
	var counts []int64
	prevIN := false
	for {
		tok, kind, good := l.next()
		if !good {
			return 0, 0, false
		}
		if kind == tokEOF {
			break
		}
		switch kind {
		case tokOpen:
			depth++
			if inWhere && prevIN && depth == 1 {
				inGroup = append(inGroup, depth)
				counts = append(counts, 1)
			}
		case tokClose:
			if n := len(inGroup); n > 0 && inGroup[n-1] == depth {
				if counts[n-1] > inValues {
					inValues = counts[n-1]
				}
				inGroup, counts = inGroup[:n-1], counts[:n-1]
			}
			depth--
		case tokComma:
			if n := len(inGroup); n > 0 && inGroup[n-1] == depth {
				counts[n-1]++
			}
		case tokWord:
			if depth != 0 {
				break
			}
			switch strings.ToUpper(tok) {
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
					if cur > alternatives {
						alternatives = cur
					}
				}
			}
		case tokSemicolon:
			inWhere = false
		}
		prevIN = kind == tokWord && depth == 0 && strings.EqualFold(tok, "IN")
	}
	return alternatives, inValues, true
}

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokWord
	tokOpen
	tokClose
	tokComma
	tokSemicolon
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
