package dolphin

// Table files, loaded by the core's own decoder (loadTable): this file only copies the bytes in and reads back the
// table info record and the output-length class records, or turns the table error record into the message the Node
// host gives ("table: <field>: <problem>", from the generated table_problems templates). No msgpack decoding happens
// in Go.

import (
	"encoding/binary"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// TableInfo is what the core reports about a table it accepted (strings sliced from the table bytes).
type TableInfo struct {
	Kind       string
	Clusters   int // K for learned kinds, 0 for rules
	Dims       int // feature count for learned kinds, 0 for rules
	Features   []string
	RemoteBits int
	Cells      int
	OSLClasses int
	// OSLClassNames are the output-length classes' names (what Request.OSLClassName may name), nil when none;
	// OSLClassRepresentative their representative lengths (the osl_hat a request of that class routes with).
	OSLClassNames          []string
	OSLClassRepresentative []float64
	OSLModel               bool
	Checksum               string // "xxh64:<16 hex digits>"
	Split                  string // "" when absent
	Seed                   float64
	Provenance             map[string]string
	guard                  tableGuard // a rule's parameters, a learned table's fallback rule and bounds, for Explain
}

func kindName(code int) string {
	for name, c := range kindCodes {
		if c == code {
			return name
		}
	}
	return "?"
}

func isLearned(kind string) bool {
	for _, k := range learnedKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// loadTable makes table the core's active table; a rejected table leaves the active one in place.
func (c *core) loadTable(table []byte) (TableInfo, error) {
	if err := c.writeBytes(table, "loadTable"); err != nil {
		return TableInfo{}, err
	}
	rc := c.call("loadTable", i32(len(table)))
	if rc == CodeBadTable {
		return TableInfo{}, c.tableError(table)
	}
	if err := c.check(rc, "loadTable"); err != nil {
		return TableInfo{}, err
	}
	info := c.tableInfo(table)
	info.guard = c.readGuard(info)
	return info, nil
}

var (
	describeMu   sync.Mutex
	describeCore *core
)

// DescribeTable validates a table file with the core's decoder and describes it (errors as Load gives them).
func DescribeTable(table []byte) (TableInfo, error) {
	describeMu.Lock()
	defer describeMu.Unlock()
	if describeCore == nil {
		c, err := newCore(1, 4<<20, 16)
		if err != nil {
			return TableInfo{}, err
		}
		describeCore = c
	}
	return describeCore.loadTable(table)
}

func slice(table []byte, at, length float64) []byte {
	a, n := int(at), int(length)
	if a < 0 || n < 0 || a+n > len(table) {
		return nil
	}
	return table[a : a+n]
}

func integer64(table []byte, at float64, signed bool) string {
	b := slice(table, at, 8)
	if b == nil {
		return "?"
	}
	u := binary.BigEndian.Uint64(b)
	if signed {
		return strconv.FormatInt(int64(u), 10)
	}
	return new(big.Int).SetUint64(u).String()
}

// jsQuote is JSON.stringify of a string, optionally cut to its first 40 UTF-16 code units plus "…" as src/table.ts
// describe() does (a surrogate pair cut in half leaves a lone surrogate, which JSON.stringify escapes).
func jsQuote(s string, cut bool) string {
	var b strings.Builder
	b.WriteByte('"')
	units := 0
	for _, r := range s {
		w := 1
		if r > 0xFFFF {
			w = 2
		}
		if cut && units+w > 40 {
			if units < 40 { // half of a pair fits: JS keeps the high surrogate alone
				fmt.Fprintf(&b, `\u%04x`, 0xD800+((r-0x10000)>>10))
			}
			b.WriteString("…")
			break
		}
		units += w
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// utf16Len counts a string's UTF-16 code units (JavaScript's length).
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++
		}
	}
	return n
}

func text(table []byte, at, length float64) string {
	b := slice(table, at, length)
	if !utf8.Valid(b) {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return string(b)
}

// describeValue is the offending value in words, as src/table.ts describe() writes it.
func describeValue(r []float64, table []byte) string {
	n, at := r[teValueNumber], r[teValueAt]
	t := int(r[teValueType])
	kind := ""
	if t >= 0 && t < len(tableValueTypes) {
		kind = tableValueTypes[t]
	}
	switch kind {
	case "nil":
		return "null"
	case "boolean":
		if n == 1 {
			return "true"
		}
		return "false"
	case "number":
		return jsNumber(n)
	case "string":
		s := text(table, at, r[teValueLength])
		return "the string " + jsQuote(s, utf16Len(s) > 40)
	case "array":
		return "an array of " + jsNumber(n)
	case "map", "object":
		return "a map"
	case "integer64":
		return "the integer " + integer64(table, at, n == 1)
	case "bin":
		return "binary data (" + jsNumber(n) + " bytes)"
	case "map_object":
		return "a Map object"
	case "undefined":
		return "a undefined"
	}
	return "nothing"
}

var placeholder = regexp.MustCompile(`\{([a-z_]+)\}`)

func problemText(r []float64, table []byte) string {
	p := int(r[teProblem])
	if p < 0 || p >= len(tableProblems) {
		return "unknown problem " + jsNumber(r[teProblem]) + " (a core newer than this host?)"
	}
	problem := tableProblems[p]
	template := problem.message
	if int(r[teValueType]) == 0 && problem.missing != "" { // value type 0: missing
		template = problem.missing
	}
	kind := kindName(int(r[teKind]))
	values := map[string]func() string{
		"got":         func() string { return describeValue(r, table) },
		"got_integer": func() string { return integer64(table, r[teValueAt], r[teValueNumber] == 1) },
		"value":       func() string { return jsNumber(r[teValueNumber]) },
		"previous":    func() string { return jsNumber(r[tePrevious]) },
		"expected":    func() string { return jsNumber(r[teExpected]) },
		"limit":       func() string { return jsNumber(r[teLimit]) },
		"count":       func() string { return jsNumber(r[teCount]) },
		"length":      func() string { return jsNumber(r[teLength]) },
		"kind":        func() string { return kind },
		"kinds":       func() string { return strings.Join(kindNamesInOrder(), ", ") },
		"params": func() string {
			if ps := kindParams[kind]; len(ps) > 0 {
				return strings.Join(ps, ", ")
			}
			return "none"
		},
		"features":     func() string { return strings.Join(featureNames, ", ") },
		"osl_features": func() string { return strings.Join(oslFeatureNames, ", ") },
		"string":       func() string { return text(table, r[teValueAt], r[teValueLength]) },
		"json":         func() string { return jsQuote(text(table, r[teValueAt], r[teValueLength]), false) },
		"actual":       func() string { return fmt.Sprintf("xxh64:%08x%08x", uint32(r[teHashHi]), uint32(r[teHashLo])) },
	}
	return placeholder.ReplaceAllStringFunc(template, func(m string) string {
		if f, ok := values[m[1:len(m)-1]]; ok {
			return f()
		}
		return m
	})
}

func kindNamesInOrder() []string {
	names := make([]string, len(kindCodes))
	for name, code := range kindCodes {
		names[code-1] = name
	}
	return names
}

func (c *core) tableError(table []byte) error {
	r := c.f64s(uint32(c.call("tableErrorPtr")), tableErrorSlots)
	pathPtr := uint32(c.call("tableErrorPathPtr"))
	field := string(c.mem[pathPtr : pathPtr+uint32(r[tePathLength])])
	if r[tePathTruncated] == 1 {
		field += "…"
	}
	return &TableError{Field: field, Message: "table: " + field + ": " + problemText(r, table)}
}

func (c *core) tableInfo(table []byte) TableInfo {
	r := c.f64s(uint32(c.call("tableInfoPtr")), tableInfoSlots)
	kind := kindName(int(r[tiKind]))
	info := TableInfo{
		Kind:       kind,
		RemoteBits: int(r[tiRemoteBits]),
		Cells:      int(r[tiCells]),
		OSLClasses: int(r[tiOslClasses]),
		OSLModel:   r[tiOslModelFeatures] > 0,
		Checksum:   fmt.Sprintf("xxh64:%08x%08x", uint32(r[tiChecksumHi]), uint32(r[tiChecksumLo])),
		Seed:       r[tiSeed],
		Provenance: map[string]string{},
	}
	if isLearned(kind) {
		info.Clusters, info.Dims = int(r[tiK]), int(r[tiDims])
	}
	for _, s := range []int{tiFeature0, tiFeature1, tiFeature2, tiFeature3} {
		if f := int(r[s]); f >= 0 && f < len(featureNames) {
			info.Features = append(info.Features, featureNames[f])
		}
	}
	str := func(at, length int) (string, bool) {
		if r[at] < 0 {
			return "", false
		}
		return text(table, r[at], r[length]), true
	}
	classes := c.f64s(uint32(c.call("tableOslClassesPtr")), info.OSLClasses*oslClassSlots)
	for i := 0; i < info.OSLClasses; i++ {
		class := classes[i*oslClassSlots : (i+1)*oslClassSlots]
		info.OSLClassNames = append(info.OSLClassNames, text(table, class[ocNameAt], class[ocNameLength]))
		info.OSLClassRepresentative = append(info.OSLClassRepresentative, class[ocRepresentative])
	}
	info.Split, _ = str(tiSplitAt, tiSplitLength)
	for key, slots := range map[string][2]int{"tool": {tiToolAt, tiToolLength}, "created": {tiCreatedAt, tiCreatedLength},
		"workload": {tiWorkloadAt, tiWorkloadLength}, "notes": {tiNotesAt, tiNotesLength}} {
		if v, ok := str(slots[0], slots[1]); ok {
			info.Provenance[key] = v
		}
	}
	return info
}
