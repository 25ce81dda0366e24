package fuel

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Version numbers the rewrite: it changes whenever Instrument's output for
// the same input does, so that caches of instrumented modules can key on it.
const Version = 5

// ErrUnsupported is wrapped by Instrument's errors for modules that use an
// encoding it does not know (an opcode or section entry of a proposal it
// does not handle). The caller can fall back to another way of stopping
// guest code.
var ErrUnsupported = errors.New("unsupported by the fuel instrumentation")

// Section ids (WebAssembly core spec 5.5.2, and the exception handling
// proposal's tag section).
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// rank orders the non-custom sections as a module must: the tag section
// sits between memory and global, data count between element and code.
var rank = map[byte]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5, secTag: 6,
	secGlobal: 7, secExport: 8, secStart: 9, secElement: 10, secDataCount: 11, secCode: 12, secData: 13,
}

// Instrument returns a copy of the module bin in which every loop head, and
// the entry of every function that calls a function on a cycle, the host,
// indirectly, or into more than a little unchecked code (see the package
// doc), decrements a new
// mutable i32 global, starting at fuel,
// and, when it reaches zero, sets it to what the imported function
// importModule.importName (type () -> i32) returns. That function must
// return a positive number; it stops the guest by panicking.
//
// bin is not modified. An error wraps ErrUnsupported when the module uses
// an encoding Instrument does not handle, and describes the offset of a
// malformed one otherwise.
func Instrument(bin []byte, importModule, importName string, fuel uint32) ([]byte, error) {
	if fuel == 0 || fuel > 1<<31-1 {
		return nil, fmt.Errorf("fuel %d must be in 1..2^31-1", fuel)
	}
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly module")
	}
	if string(bin[4:8]) != "\x01\x00\x00\x00" {
		return nil, fmt.Errorf("%w: binary format version %x", ErrUnsupported, bin[4:8])
	}
	w := rewriter{mod: importModule, name: importName, fuel: fuel}
	out, err := w.run(bin)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// rewriter carries what earlier sections tell the later ones.
type rewriter struct {
	mod, name string
	fuel      uint32

	types       uint32 // type entries: the new type's index
	funcImports uint32 // imported functions: the new import's index
	globals     uint32 // imported + defined globals: the fuel global's index
	haveType    bool
	haveImport  bool
	haveGlobal  bool
	lastRank    int
	check       []byte // the instructions inserted at each check point
	out         []byte
	dataCount   bool // a data count section: segments are named by index
	memImported bool // memory is imported: its initial bytes are unknown

	// For the names of functions the module does not name (see names):
	exports   map[uint32]string // new function index -> its first export name
	defined   uint32            // functions defined in the module (code section)
	codeSeen  bool
	namesDone bool // a name section with function names was written

	calls bool // the function body being copied calls a function

	// For the entry checks (see entryChecks): while scanning is set, expr
	// records the direct callees of the body it walks in callees (original
	// indices), and sets opaque for a call it cannot follow (indirect).
	scanning bool
	callees  []uint32
	opaque   bool
}

func (w *rewriter) run(bin []byte) ([]byte, error) {
	w.out = make([]byte, 0, len(bin)+len(bin)/4+64)
	w.out = append(w.out, bin[:8]...)
	r := reader{b: bin, i: 8}
	for r.i < len(r.b) {
		start := r.i
		id := r.byte()
		size := r.u32()
		if r.err != nil {
			return nil, r.errorf("section header at offset %d", start)
		}
		if uint64(size) > uint64(len(r.b)-r.i) {
			return nil, fmt.Errorf("section %d at offset %d: size %d past the end", id, start, size)
		}
		body := r.b[r.i : r.i+int(size)]
		base := r.i
		r.i += int(size)
		if id == secCustom {
			if err := w.custom(body, base); err != nil {
				return nil, err
			}
			continue
		}
		rk, ok := rank[id]
		if !ok {
			return nil, fmt.Errorf("%w: section id %d at offset %d", ErrUnsupported, id, start)
		}
		if rk <= w.lastRank {
			return nil, fmt.Errorf("section %d at offset %d out of order", id, start)
		}
		w.insertMissing(rk)
		w.lastRank = rk
		out := body
		if rewrite, ok := rewriters[id]; ok {
			var err error
			if out, err = rewrite(w, body, base); err != nil {
				return nil, err
			}
		}
		w.out = appendSection(w.out, id, out)
	}
	w.insertMissing(len(rank) + 1)
	if !w.namesDone && w.codeSeen && w.defined > 0 {
		// No name section: one that names every function, so that a
		// trace shows the names or numbers the author knows (see names).
		nb := appendSection(nil, 1, w.funcNames(nil))
		w.out = appendSection(w.out, secCustom, append(appendName(nil, "name"), nb...))
	}
	return w.out, nil
}

// insertMissing writes the type, import and global sections the module
// lacks, before the first section that must follow them.
func (w *rewriter) insertMissing(next int) {
	if !w.haveType && next > rank[secType] {
		w.haveType = true
		w.types = 0
		w.out = appendSection(w.out, secType, appendType(appendU32(nil, 1)))
	}
	if !w.haveImport && next > rank[secImport] {
		w.haveImport = true
		w.out = appendSection(w.out, secImport, w.appendImport(appendU32(nil, 1)))
	}
	if !w.haveGlobal && next > rank[secGlobal] {
		w.haveGlobal = true
		w.out = appendSection(w.out, secGlobal, w.appendGlobal(appendU32(nil, 1)))
	}
	if w.haveGlobal && w.check == nil {
		w.check = w.checkCode()
	}
}

// appendType appends the new function type () -> i32.
func appendType(dst []byte) []byte { return append(dst, 0x60, 0x00, 0x01, 0x7f) }

func (w *rewriter) appendImport(dst []byte) []byte {
	dst = appendName(dst, w.mod)
	dst = appendName(dst, w.name)
	dst = append(dst, 0x00)
	return appendU32(dst, w.types)
}

func (w *rewriter) appendGlobal(dst []byte) []byte {
	dst = append(dst, 0x7f, 0x01, 0x41)
	dst = appendS32(dst, int32(w.fuel))
	return append(dst, 0x0b)
}

// checkCode is the check inserted at each function entry and loop head:
//
//	global.get $fuel  i32.const 1  i32.sub  global.set $fuel
//	global.get $fuel  i32.eqz
//	if  call $refill  global.set $fuel  end
func (w *rewriter) checkCode() []byte {
	g := appendU32(nil, w.globals)
	var c []byte
	c = append(append(append(c, 0x23), g...), 0x41, 0x01, 0x6b, 0x24)
	c = append(append(c, g...), 0x23)
	c = append(append(c, g...), 0x45, 0x04, 0x40, 0x10)
	c = appendU32(c, w.funcImports)
	c = append(append(append(c, 0x24), g...), 0x0b)
	return c
}

// rewriters rewrite the sections the instrumentation reads or changes
// (the others are copied as they are): each returns the section's new
// body, or why it cannot.
var rewriters = map[byte]func(w *rewriter, body []byte, base int) ([]byte, error){
	secType:    (*rewriter).typeSection,
	secImport:  (*rewriter).importSection,
	secGlobal:  (*rewriter).globalSection,
	secExport:  (*rewriter).exportSection,
	secStart:   (*rewriter).startSection,
	secElement: (*rewriter).elementSection,
	secCode:    (*rewriter).codeSection,
	secDataCount: func(w *rewriter, body []byte, _ int) ([]byte, error) {
		w.dataCount = true
		return body, nil
	},
	secData: func(w *rewriter, body []byte, _ int) ([]byte, error) { return w.dataSection(body), nil },
}

func (w *rewriter) typeSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	entries := r.i
	for i := uint32(0); i < n && r.err == nil; i++ {
		if form := r.byte(); form != 0x60 && r.err == nil {
			return nil, fmt.Errorf("%w: type entry form 0x%02x at offset %d", ErrUnsupported, form, base+r.i-1)
		}
		for k := 0; k < 2; k++ {
			m := r.u32()
			for j := uint32(0); j < m && r.err == nil; j++ {
				r.valtype()
			}
		}
	}
	w.haveType = true
	w.types = n
	return appendType(append(appendU32(nil, n+1), body[entries:]...)), r.done("type section")
}

func (w *rewriter) importSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	entries := r.i
	for i := uint32(0); i < n && r.err == nil; i++ {
		mod, name := r.name(), r.name()
		if mod == w.mod && name == w.name {
			return nil, fmt.Errorf("module already imports %s.%s, the name the fuel instrumentation uses", mod, name)
		}
		switch kind := r.byte(); kind {
		case 0x00:
			r.u32()
			w.funcImports++
		case 0x01:
			r.valtype()
			r.limits()
		case 0x02:
			r.limits()
			w.memImported = true
		case 0x03:
			r.valtype()
			r.byte()
			w.globals++
		case 0x04:
			r.byte()
			r.u32()
		default:
			if r.err == nil {
				return nil, fmt.Errorf("%w: import kind 0x%02x at offset %d", ErrUnsupported, kind, base+r.i-1)
			}
		}
	}
	w.haveImport = true
	return w.appendImport(append(appendU32(nil, n+1), body[entries:]...)), r.done("import section")
}

func (w *rewriter) globalSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	dst := appendU32(nil, n+1)
	for i := uint32(0); i < n && r.err == nil; i++ {
		s := r.i
		r.valtype()
		r.byte()
		dst = append(dst, body[s:r.i]...)
		var err error
		if dst, err = w.expr(&r, dst, false); err != nil {
			return nil, err
		}
	}
	w.globals += n
	w.haveGlobal = true
	w.check = w.checkCode()
	return w.appendGlobal(dst), r.done("global section")
}

func (w *rewriter) exportSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	dst := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		s := r.i
		name := r.name()
		kind := r.byte()
		dst = append(dst, body[s:r.i]...)
		idx := r.u32()
		if kind == 0x00 {
			idx = w.fn(idx)
			if _, ok := w.exports[idx]; !ok {
				if w.exports == nil {
					w.exports = map[uint32]string{}
				}
				w.exports[idx] = name
			}
		}
		dst = appendU32(dst, idx)
	}
	return dst, r.done("export section")
}

func (w *rewriter) startSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	idx := r.u32()
	return appendU32(nil, w.fn(idx)), r.done("start section")
}

func (w *rewriter) elementSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	dst := appendU32(nil, n)
	var err error
	for i := uint32(0); i < n && r.err == nil && err == nil; i++ {
		flags := r.u32()
		dst = appendU32(dst, flags)
		if flags > 7 {
			if r.err == nil {
				return nil, fmt.Errorf("%w: element segment flags %d at offset %d", ErrUnsupported, flags, base+r.i)
			}
			break
		}
		if flags&3 == 2 { // explicit table index
			dst = appendU32(dst, r.u32())
		}
		if flags&1 == 0 { // active: offset expression
			if dst, err = w.expr(&r, dst, false); err != nil {
				return nil, err
			}
		}
		if flags&3 != 0 { // element kind or reference type
			s := r.i
			if flags&4 == 0 {
				r.byte()
			} else {
				r.valtype()
			}
			dst = append(dst, body[s:r.i]...)
		}
		m := r.u32()
		dst = appendU32(dst, m)
		for j := uint32(0); j < m && r.err == nil; j++ {
			if flags&4 == 0 {
				dst = appendU32(dst, w.fn(r.u32()))
			} else if dst, err = w.expr(&r, dst, false); err != nil {
				return nil, err
			}
		}
	}
	return dst, r.done("element section")
}

func (w *rewriter) codeSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	dst := make([]byte, 0, len(body)+len(body)/4)
	dst = appendU32(dst, n)
	var fb []byte
	w.defined, w.codeSeen = n, true
	checked, err := w.entryChecks(r, n)
	if err != nil {
		return nil, err
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		size := r.u32()
		if r.err != nil {
			break
		}
		if uint64(size) > uint64(len(body)-r.i) {
			return nil, fmt.Errorf("function body %d at offset %d: size %d past the end", i, base+r.i, size)
		}
		bodyStart := r.i
		fr := reader{b: body[:r.i+int(size)], i: r.i, base: base}
		r.i += int(size)
		groups := fr.u32()
		for j := uint32(0); j < groups && fr.err == nil; j++ {
			fr.u32()
			fr.valtype()
		}
		if fr.err != nil {
			return nil, fr.errorf("locals of function body %d", i)
		}
		fb = append(fb[:0], fr.b[bodyStart:fr.i]...)
		entry := len(fb)
		w.calls = false
		if fb, err = w.expr(&fr, fb, true); err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		// See entryChecks for which functions need a check at entry.
		if checked[i] {
			fb = slices.Insert(fb, entry, w.check...)
		}
		if fr.i != len(fr.b) {
			return nil, fmt.Errorf("function body %d: code after its end at offset %d", i, base+fr.i)
		}
		dst = appendU32(dst, uint32(len(fb)))
		dst = append(dst, fb...)
	}
	return dst, r.done("code section")
}

// entryLimit bounds, in bytes of function bodies, the code a call may run
// between two checks through functions that go without an entry check (see
// entryChecks). Loops are checked at every head, so straight-line code is
// all it counts: 2 KiB is at most a few microseconds.
const entryLimit = 2048

// entryChecks decides which of the n defined functions of the code section
// r (at its first body) get a check at their entry. The checks at loop
// heads bound every loop; the entry checks must bound the rest, recursion
// and chains of calls, so that the code run between two checks stays
// bounded:
//   - a function that calls nothing goes without (its entries are bounded by
//     its callers', as before);
//   - one that calls an import, calls indirectly, or is on a cycle of direct
//     calls (found as the target of a back edge of a depth-first walk, so
//     every cycle has one) gets a check;
//   - any other goes without while its body plus those of the unchecked
//     functions it calls, counted per call site, stay within entryLimit.
//
// A body it cannot read makes every function that calls get a check (the
// rewrite proper then reports the error).
func (w *rewriter) entryChecks(r reader, n uint32) ([]bool, error) {
	checked := make([]bool, n)
	size := make([]int, n)
	callees := make([][]uint32, n)
	calls := make([]bool, n)
	w.scanning = true
	defer func() { w.scanning = false }()
	var scratch []byte
	for i := uint32(0); i < n; i++ {
		sz := r.u32()
		if r.err != nil || uint64(sz) > uint64(len(r.b)-r.i) {
			return allTrue(checked), nil
		}
		fr := reader{b: r.b[:r.i+int(sz)], i: r.i, base: r.base}
		r.i += int(sz)
		groups := fr.u32()
		for j := uint32(0); j < groups && fr.err == nil; j++ {
			fr.u32()
			fr.valtype()
		}
		w.calls, w.opaque, w.callees = false, false, w.callees[:0]
		var err error
		if fr.err != nil {
			return allTrue(checked), nil
		}
		if scratch, err = w.expr(&fr, scratch[:0], true); err != nil {
			return allTrue(checked), nil
		}
		size[i], calls[i] = int(sz), w.calls
		checked[i] = w.opaque
		for _, c := range w.callees {
			if c < w.funcImports || c-w.funcImports >= n {
				checked[i] = true // an import (the host), or out of range
				continue
			}
			callees[i] = append(callees[i], c-w.funcImports)
		}
	}
	// A depth-first walk over the direct calls; a function's cost is known
	// when its walk ends, its callees' first.
	const (
		unseen = iota
		open
		done
	)
	state := make([]uint8, n)
	cost := make([]int, n)
	type frame struct {
		f uint32
		k int // the next of callees[f] to visit
	}
	var stack []frame
	for root := uint32(0); root < n; root++ {
		if state[root] != unseen {
			continue
		}
		state[root] = open
		stack = append(stack[:0], frame{f: root})
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if f := top.f; top.k < len(callees[f]) {
				g := callees[f][top.k]
				top.k++
				switch state[g] {
				case unseen:
					state[g] = open
					stack = append(stack, frame{f: g})
				case open: // a back edge: g is on a cycle
					checked[g] = true
				}
				continue
			}
			f := top.f
			stack = stack[:len(stack)-1]
			state[f] = done
			c := size[f]
			for _, g := range callees[f] {
				if !checked[g] {
					c = min(c+cost[g], entryLimit+1)
				}
			}
			cost[f] = c
			if calls[f] && c > entryLimit {
				checked[f] = true
			}
		}
	}
	return checked, nil
}

func allTrue(b []bool) []bool {
	for i := range b {
		b[i] = true
	}
	return b
}

// custom copies a custom section, renumbering the name section's function
// indices and dropping DWARF sections.
func (w *rewriter) custom(body []byte, base int) error {
	r := reader{b: body, base: base}
	name := r.name()
	if r.err != nil {
		return r.errorf("custom section name")
	}
	switch {
	case strings.HasPrefix(name, ".debug_"), name == "external_debug_info", name == "sourceMappingURL":
		return nil
	case name == "name":
		if nb, ok := w.names(body[r.i:]); ok {
			w.out = appendSection(w.out, secCustom, append(appendName(nil, name), nb...))
		}
		// A name section that does not parse is dropped: it is only names.
		return nil
	}
	w.out = appendSection(w.out, secCustom, body)
	return nil
}

// names renumbers the function indices of the name section's function,
// local and label subsections. Once the code section is known, it also
// names every defined function the section does not: by its first export
// name, or else "$N" with N its index in the module as it was given, since
// wazero shows an unnamed function by its index, which the rewrite moved.
func (w *rewriter) names(body []byte) ([]byte, bool) {
	r := reader{b: body}
	var dst []byte
	fill := w.codeSeen && !w.namesDone
	for r.i < len(r.b) && r.err == nil {
		id := r.byte()
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(r.b)-r.i) {
			return nil, false
		}
		sub := r.b[r.i : r.i+int(size)]
		r.i += int(size)
		if fill && id > 1 {
			dst = appendSection(dst, 1, w.funcNames(nil))
			fill = false
		}
		if id < 1 || id > 3 {
			dst = appendSection(dst, id, sub)
			continue
		}
		sr := reader{b: sub}
		n := sr.u32()
		out := appendU32(nil, n)
		var named map[uint32][]byte // id 1: new index -> encoded name
		for i := uint32(0); i < n && sr.err == nil; i++ {
			idx := w.fn(sr.u32())
			out = appendU32(out, idx)
			s := sr.i
			if id == 1 {
				sr.name()
				if named == nil {
					named = make(map[uint32][]byte, n)
				}
				named[idx] = sub[s:sr.i]
			} else {
				m := sr.u32()
				for j := uint32(0); j < m && sr.err == nil; j++ {
					sr.u32()
					sr.name()
				}
			}
			out = append(out, sub[s:sr.i]...)
		}
		if sr.err != nil || sr.i != len(sub) {
			return nil, false
		}
		if id == 1 && fill {
			out = w.funcNames(named)
			fill = false
		}
		dst = appendSection(dst, id, out)
	}
	if fill {
		dst = appendSection(dst, 1, w.funcNames(nil))
	}
	if r.err == nil && w.codeSeen {
		w.namesDone = true
	}
	return dst, r.err == nil
}

// funcNames encodes a function name map (name subsection 1) with named's
// entries (new index -> encoded name), imports that have one, and a name
// for every other defined function (see names).
func (w *rewriter) funcNames(named map[uint32][]byte) []byte {
	var idx []uint32
	for i := range named {
		if i < w.funcImports { // imports keep what they had
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	first := w.funcImports + 1 // defined functions, after the fuel import
	out := appendU32(nil, uint32(len(idx))+w.defined)
	for _, i := range idx {
		out = append(appendU32(out, i), named[i]...)
	}
	for i := first; i < first+w.defined; i++ {
		out = appendU32(out, i)
		switch name, ok := named[i]; {
		case ok:
			out = append(out, name...)
		case w.exports[i] != "":
			out = appendName(out, w.exports[i])
		default:
			out = appendName(out, "$"+strconv.FormatUint(uint64(i-1), 10))
		}
	}
	return out
}

// fn renumbers a function index: defined functions move up by one.
func (w *rewriter) fn(idx uint32) uint32 {
	if idx >= w.funcImports {
		return idx + 1
	}
	return idx
}

// expr copies instructions from r to dst up to and including the end that
// closes the expression, renumbering function indices and, in code
// (inCode), inserting the check after every loop's block type.
func (w *rewriter) expr(r *reader, dst []byte, inCode bool) ([]byte, error) {
	depth := 0
	run := r.i // start of the bytes not yet copied
	flush := func(upTo int) { dst = append(dst, r.b[run:upTo]...) }
	for {
		if r.err != nil {
			return nil, r.errorf("instruction")
		}
		if r.i >= len(r.b) {
			return nil, fmt.Errorf("expression runs past the end at offset %d", r.base+r.i)
		}
		at := r.i
		op := r.byte()
		switch {
		case op == 0x0b || op == 0x18: // end, delegate (which ends a try)
			if op == 0x18 {
				r.u32()
			}
			if depth == 0 {
				flush(r.i)
				return dst, nil
			}
			depth--
		case op == 0x02 || op == 0x04 || op == 0x06: // block, if, try
			r.blocktype()
			depth++
		case op == 0x03: // loop
			r.blocktype()
			depth++
			if inCode {
				flush(r.i)
				dst = append(dst, w.check...)
				run = r.i
			}
		case op == 0x1f: // try_table
			r.blocktype()
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				if k := r.byte(); k <= 1 {
					r.u32()
				}
				r.u32()
			}
			depth++
		case op == 0x10 || op == 0x12 || op == 0xd2: // call, return_call, ref.func
			idx := r.u32()
			if r.err != nil {
				continue
			}
			if op != 0xd2 {
				w.calls = true
				if w.scanning {
					w.callees = append(w.callees, idx)
				}
			}
			flush(at)
			dst = appendU32(append(dst, op), w.fn(idx))
			run = r.i
		case op <= 0x01, op == 0x05, op == 0x0a, op == 0x0f, op == 0x19, op == 0x1a, op == 0x1b,
			op >= 0x45 && op <= 0xc4, op == 0xd1, op == 0xd3, op == 0xd5:
			// no immediates
		case op == 0x07, op == 0x08, op == 0x09, op == 0x0c, op == 0x0d,
			op >= 0x20 && op <= 0x26, op == 0x3f, op == 0x40, op == 0xd4, op == 0xd6:
			r.u32()
		case op == 0x0e: // br_table
			n := r.u32()
			for i := uint32(0); i <= n && r.err == nil; i++ {
				r.u32()
			}
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
			w.calls, w.opaque = true, true
		case op == 0x14 || op == 0x15: // call_ref, return_call_ref
			r.u32()
			w.calls, w.opaque = true, true
		case op == 0x1c: // select t*
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				r.valtype()
			}
		case op >= 0x28 && op <= 0x3e:
			r.memarg()
		case op == 0x41:
			r.leb(5)
		case op == 0x42:
			r.leb(10)
		case op == 0x43:
			r.skip(4)
		case op == 0x44:
			r.skip(8)
		case op == 0xd0:
			r.blocktype() // a heap type is an s33 like a block type
		case op == 0xfc:
			if err := r.prefixFC(); err != nil {
				return nil, err
			}
		case op == 0xfd:
			if err := r.prefixFD(); err != nil {
				return nil, err
			}
		case op == 0xfe:
			if sub := r.u32(); sub == 0x03 {
				r.byte()
			} else {
				r.memarg()
			}
		default:
			return nil, fmt.Errorf("%w: opcode 0x%02x at offset %d", ErrUnsupported, op, r.base+at)
		}
	}
}

func (r *reader) prefixFC() error {
	at := r.i
	switch sub := r.u32(); {
	case sub <= 7:
	case sub == 8, sub == 10, sub == 12, sub == 14:
		r.u32()
		r.u32()
	case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
		r.u32()
	default:
		if r.err == nil {
			return fmt.Errorf("%w: opcode 0xfc %d at offset %d", ErrUnsupported, sub, r.base+at)
		}
	}
	return nil
}

func (r *reader) prefixFD() error {
	at := r.i
	switch sub := r.u32(); {
	case sub <= 11, sub == 92, sub == 93:
		r.memarg()
	case sub == 12, sub == 13:
		r.skip(16)
	case sub >= 21 && sub <= 34:
		r.byte()
	case sub >= 84 && sub <= 91:
		r.memarg()
		r.byte()
	case sub <= 0x113:
	default:
		if r.err == nil {
			return fmt.Errorf("%w: opcode 0xfd %d at offset %d", ErrUnsupported, sub, r.base+at)
		}
	}
	return nil
}

// mergeGap is the largest run of zero bytes between two active data
// segments that dataSection fills to merge them.
const mergeGap = 64

// dataSection returns the data section body with adjacent active segments
// merged: the Go linker splits its data at every run of zeros, which makes
// tens of thousands of segments that wazero decodes and copies one by one at
// every start. Merging is done only when it cannot change the memory's
// initial contents or any instruction's meaning: every segment is active,
// in memory 0, at an i32.const offset, none overlap, no data count section
// (so no memory.init or data.drop names a segment) and the memory is the
// module's own (fresh, so zero, where no segment writes). Otherwise body is
// returned as it is.
func (w *rewriter) dataSection(body []byte) []byte {
	if w.dataCount || w.memImported {
		return body
	}
	type seg struct {
		off  uint32
		data []byte
	}
	r := reader{b: body}
	n := r.u32()
	if n < 2 || uint64(n) > uint64(len(body)) {
		return body
	}
	segs := make([]seg, 0, n)
	for i := uint32(0); i < n; i++ {
		if r.u32() != 0 || r.byte() != 0x41 {
			return body
		}
		off := r.s32()
		if r.byte() != 0x0b || r.err != nil {
			return body
		}
		size := r.u32()
		s := r.i
		r.skip(int(size))
		if r.err != nil {
			return body
		}
		// The offset is an s32; as a memory address it is unsigned.
		segs = append(segs, seg{uint32(off), body[s:r.i]})
	}
	if r.i != len(body) {
		return body
	}
	slices.SortStableFunc(segs, func(a, b seg) int { return cmp.Compare(a.off, b.off) })
	for i := 1; i < len(segs); i++ {
		if uint64(segs[i-1].off)+uint64(len(segs[i-1].data)) > uint64(segs[i].off) {
			return body // overlap: order would matter
		}
	}
	var merged []seg
	var cur []byte
	var start uint32
	for i, sg := range segs {
		end := uint64(start) + uint64(len(cur))
		if i > 0 && uint64(sg.off)-end <= mergeGap {
			cur = append(cur, make([]byte, uint64(sg.off)-end)...)
			cur = append(cur, sg.data...)
			continue
		}
		if i > 0 {
			merged = append(merged, seg{start, cur})
		}
		start, cur = sg.off, append([]byte(nil), sg.data...)
	}
	merged = append(merged, seg{start, cur})
	out := appendU32(nil, uint32(len(merged)))
	for _, sg := range merged {
		out = append(out, 0x00, 0x41)
		out = appendS32(out, int32(sg.off))
		out = append(out, 0x0b)
		out = appendU32(out, uint32(len(sg.data)))
		out = append(out, sg.data...)
	}
	return out
}
