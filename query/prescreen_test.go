package query

import "testing"

func TestPrescreen(t *testing.T) {
	tests := []struct {
		sql      string
		alt, in  int64
		lexesBad bool
	}{
		{"SELECT id FROM t WHERE a = 1 OR b = 2 OR c = 3", 3, 0, false},
		{"SELECT id FROM t WHERE (a = 1 OR b = 2) AND c = 3", 1, 0, false},
		{"SELECT id FROM t WHERE NOT a OR b", 2, 0, false},
		{"SELECT id FROM t WHERE CASE WHEN a OR b THEN true END OR c", 2, 0, false},
		{"SELECT id FROM t WHERE x = 'a OR b' OR \"or\" = $$ OR $$ OR y = E'\\' OR '", 3, 0, false},
		{"SELECT id FROM t WHERE a -- OR b\n OR c /* OR /* nested */ OR */", 2, 0, false},
		{"SELECT id FROM t WHERE x IN (1, 2, f(3, 4)) OR y IN (5)", 2, 3, false},
		{"SELECT id FROM t WHERE ARRAY[a OR b] = y", 1, 0, false},
		{"SELECT id FROM t WHERE a OR b ORDER BY c OR d", 2, 0, false},
		{"SELECT id FROM t WHERE a OR b UNION SELECT id FROM t WHERE c OR d OR e", 3, 0, false},
		{"SELECT id FROM t WHERE x = 'unterminated", 0, 0, true},
	}
	for _, tt := range tests {
		alt, in, ok := prescreen(tt.sql)
		if ok == tt.lexesBad {
			t.Errorf("prescreen(%q) ok = %v, want %v", tt.sql, ok, !tt.lexesBad)
			continue
		}
		if ok && (alt != tt.alt || in != tt.in) {
			t.Errorf("prescreen(%q) = %d alternatives, %d IN values; want %d, %d", tt.sql, alt, in, tt.alt, tt.in)
		}
	}
}
