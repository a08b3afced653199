package query

// PostgreSQL's parser and its deparser (Compile prints the tree it
// compiled, Render prints the tree it reads with) recurse on the C stack
// of the thread that calls them, as deep as the tree they read or print.
// Nothing in them checks the depth, and a crash there ends the process.
// Measured with TestProbeParserCrash and a 1 MiB stack: the parser crashes
// at about 3,000 levels of 1+1+...+1 (350 bytes a level; 23,900 levels on
// the usual 8 MiB), the deparser at 549 levels of any chain (1,900 bytes
// a level), 190 nested subqueries, 286 nested CASEs. prescreen bounds the
// depth before either runs; this is the bound.
const (
	cStackPerLevel = 2000
	// maxNesting caps the bound whatever the stack: a tree 1,000 levels
	// deep is no query anyone writes, and past about 5,000 the parse
	// fails anyway (the protobuf its tree crosses into Go in refuses
	// messages nested deeper than 10,000). On the usual 8 MiB stack the
	// deparser would crash past about 4,400.
	maxNesting = 1000
	// minNesting is the least the bound goes down to (a stack under
	// 512 KiB), for ordinary queries to parse at all.
	minNesting = 64
)

// nestingCeiling is the deepest parse tree (as prescreen bounds it) that
// reaches PostgreSQL's parser, whatever Options say: a quarter of what
// the threads' C stack holds, at most maxNesting.
var nestingCeiling = ceilingFor(threadStackBytes())

// ceilingFor returns the nesting ceiling for a C stack of stack bytes.
func ceilingFor(stack int64) int64 {
	return min(maxNesting, max(minNesting, stack/(4*cStackPerLevel)))
}
