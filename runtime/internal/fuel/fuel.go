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
const Version = 6

// ErrUnsupported is wrapped by Instrument's errors for modules that use an
// encoding it does not know (an opcode or section entry of a proposal it
// does not handle). The caller can fall back to another way of stopping
// guest code.
var ErrUnsupported = errors.New("unsupported by the fuel instrumentation")

// ErrInvalid is wrapped by Rewrite's errors for a module that is not valid
// as given: an instruction or a section entry that names an index (a
// global, function, type, table, local, element or data segment) the
// module does not declare. Such a module must be refused, not run another
// way: the rewrite adds a type, a function and globals after the module's
// own, so an index one past the module's own would name them.
var ErrInvalid = errors.New("invalid module")

// InvalidError says where a module names an index it does not declare.
type InvalidError struct {
	// Func is the function's index in the module as given and Name its
	// first export name, if any; Func is -1 outside code.
	Func int64
	Name string
	// Offset is the instruction's (or entry's) offset in the module.
	Offset int
	Msg    string
}

func (e *InvalidError) Error() string {
	if e.Func < 0 {
		return fmt.Sprintf("%v: at offset %#x: %s", ErrInvalid, e.Offset, e.Msg)
	}
	name := ""
	if e.Name != "" {
		name = " (" + e.Name + ")"
	}
	return fmt.Sprintf("%v: function %d%s, instruction at offset %#x: %s", ErrInvalid, e.Func, name, e.Offset, e.Msg)
}

func (e *InvalidError) Unwrap() error { return ErrInvalid }

// ErrTooComplex is wrapped by Rewrite's errors for a function whose
// structure is beyond the limits that keep its compile time bounded
// (MaxDepth, MaxBrTableTargets): wazero's compile time grows with the
// square of a function's nesting depth and of a br_table's size, and one
// function's compile cannot be interrupted.
var ErrTooComplex = errors.New("function too complex to compile in bounded time")

// The structure limits of one function (ErrTooComplex). Toolchains stay far
// below them (a Go plugin nests blocks 296 deep and its largest br_table
// has 535 targets); at the limits one function compiles in about 0.6 s and
// 1.7 s on a 2-core machine.
const (
	MaxDepth          = 8192
	MaxBrTableTargets = 65536
)

// TableLimitError refuses a module one of whose tables starts with more
// elements than Options.MaxTableElements allows.
type TableLimitError struct {
	Table uint32 // the table's index
	Min   uint64 // its initial size
	Limit uint32
}

func (e *TableLimitError) Error() string {
	return fmt.Sprintf("table %d starts with %d elements, more than the limit of %d", e.Table, e.Min, e.Limit)
}

// Options say how Rewrite instruments a module.
type Options struct {
	// Module and Name name the imported refill function, of type () -> i32.
	Module, Name string
	// Fuel is the fuel the module starts with, 1 to 2^31-1.
	Fuel uint32
	// MaxTableElements, when not 0, caps every table the module defines:
	// its maximum becomes at most this (so table.grow past it returns -1),
	// and a module one of whose tables starts larger is refused with a
	// *TableLimitError.
	MaxTableElements uint32
	// TableRequest, when not empty, is the name under which the rewritten
	// module exports a mutable i64 global that a refused table.grow sets to
	// the table size it asked for (the size before plus the growth), so
	// that the host can say why a guest failed.
	TableRequest string
}

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
	return Rewrite(bin, Options{Module: importModule, Name: importName, Fuel: fuel})
}

// Rewrite is Instrument with more options: it also caps the module's
// tables (Options.MaxTableElements). Before it rewrites anything it checks
// that every index the module names is one it declares (an error wrapping
// ErrInvalid), so that no instruction of the module can reach what the
// rewrite adds; the rest of validation (types, the operand stack) is
// wazero's, of the rewritten module, which is valid exactly when the
// module as given is: the rewrite inserts only self-contained,
// stack-neutral code and renumbers only function indices.
func Rewrite(bin []byte, o Options) ([]byte, error) {
	if o.Fuel == 0 || o.Fuel > 1<<31-1 {
		return nil, fmt.Errorf("fuel %d must be in 1..2^31-1", o.Fuel)
	}
	if err := header(bin); err != nil {
		return nil, err
	}
	w := rewriter{mod: o.Module, name: o.Name, fuel: o.Fuel, opts: o}
	out, err := w.run(bin)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func header(bin []byte) error {
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return errors.New("not a WebAssembly module")
	}
	if string(bin[4:8]) != "\x01\x00\x00\x00" {
		return fmt.Errorf("%w: binary format version %x", ErrUnsupported, bin[4:8])
	}
	return nil
}

// LimitTables returns a copy of bin whose tables are capped at max
// elements as Rewrite caps them, and nothing else changed: for a module
// that runs without fuel checks (a trusted one, or one the instrumentation
// cannot read). Only the section headers and the table section are read.
func LimitTables(bin []byte, max uint32) ([]byte, error) {
	if err := header(bin); err != nil {
		return nil, err
	}
	w := rewriter{opts: Options{MaxTableElements: max}}
	out := append(make([]byte, 0, len(bin)+16), bin[:8]...)
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
		if id == secTable {
			b, err := w.tableSection(body, r.i)
			if err != nil {
				return nil, err
			}
			body = b
		}
		r.i += int(size)
		out = appendSection(out, id, body)
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
	chargeAt    int    // where check holds its charge
	testAt      int    // where check tests the fuel left
	out         []byte
	dataCount   bool // a data count section: segments are named by index
	memImported bool // memory is imported: its initial bytes are unknown

	// For the names of functions the module does not name (see names):
	exports   map[uint32]string // new function index -> its first export name
	defined   uint32            // functions defined in the module (code section)
	codeSeen  bool
	namesDone bool // a name section with function names was written

	calls bool // the function body being copied calls a function

	constGlobals uint32 // the globals a constant expression may name (constExpr)

	// For the entry checks (see entryChecks): while scanning is set, expr
	// records the direct callees of the body it walks in callees (original
	// indices), and sets opaque for a call it cannot follow (indirect).
	scanning bool
	callees  []uint32
	opaque   bool

	opts Options
	// What the module declares, for the index checks (checkIndex): the
	// parameters of each type, the type of each defined function, its
	// tables, element segments and data segments (from the data count
	// section, when there is one).
	typeParams  []uint32
	funcTypes   []uint32
	tables      uint32
	elems       uint32
	dataCnt     uint32
	haveDataCnt bool
	haveExport  bool
	// The globals the rewrite adds after the module's own (whose count is
	// gFuel): the fuel, two scratch globals of the bulk instructions'
	// charges, and the refused table size (TableRequest).
	gFuel, gR, gReq uint32
	grow            []byte // the code after table.grow, but its table index

	// The function body being written (see expr): its index in the module
	// as given, its locals (parameters included), and the check sites, the
	// code owners (the function and each loop in it) and the open blocks.
	fnIdx      uint32
	locals     uint64
	scratch    uint32 // the local the rewrite adds to a function with bulk instructions
	hasScratch bool
	hasBulk    []bool // which functions have bulk instructions (entryChecks)
	scanBulk   bool
	brTargets  int // br_table targets in the function so far
	sites      []site
	owners     []owner
	ctl        []ctlEntry
	checked    []bool
	cost       []int
	// refs marks the functions an element segment, an export or a global
	// names, the only ones a table or a ref.func can hold (so that
	// call_indirect and call_ref can call); maxIndirect is the most code
	// one of them without an entry check runs (see entryChecks).
	refs        []bool
	maxIndirect int
}

// A site is a check written into the current function body at pos, which
// pays for the code that follows it up to the next site (bytes, in bytes
// of code, calls counted as the code they run).
type site struct {
	pos   int
	bytes int
}

// An owner is the function or a loop: the code between its head and its
// end, less the loops nested in it. cur is its current site (the last one
// in the code so far; -1 for the body of a function without an entry
// check, whose code its callers pay for) and ctlBase its first entry in
// the rewriter's ctl.
type owner struct {
	cur     int
	ctlBase int
}

// A ctlEntry is an open block, if, try or loop; site records that a site
// was written inside it for the owner it belongs to.
type ctlEntry struct {
	loop bool
	site bool
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

// insertMissing writes the type, import, global and export sections the
// module lacks, before the first section that must follow them.
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
		w.setGlobals()
		w.out = appendSection(w.out, secGlobal, w.appendGlobals(appendU32(nil, w.added())))
	}
	if !w.haveExport && next > rank[secExport] && w.opts.TableRequest != "" {
		w.haveExport = true
		w.out = appendSection(w.out, secExport, w.appendExport(appendU32(nil, 1)))
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

// added is how many globals the rewrite adds.
func (w *rewriter) added() uint32 {
	if w.opts.TableRequest != "" {
		return 3
	}
	return 2
}

// setGlobals numbers the added globals, after the module's w.globals, and
// makes the code that uses them.
func (w *rewriter) setGlobals() {
	w.gFuel, w.gR, w.gReq = w.globals, w.globals+1, w.globals+2
	w.check = w.checkCode()
	w.grow = w.growCode()
}

// appendGlobals appends the added globals: the fuel (mutable i32, starting
// at the fuel), the scratch r (mutable i32) and the refused table size
// (mutable i64).
func (w *rewriter) appendGlobals(dst []byte) []byte {
	dst = append(dst, 0x7f, 0x01, 0x41)
	dst = appendS32(dst, int32(w.fuel))
	dst = append(dst, 0x0b)
	dst = append(dst, 0x7f, 0x01, 0x41, 0x00, 0x0b)
	if w.opts.TableRequest != "" {
		dst = append(dst, 0x7e, 0x01, 0x42, 0x00, 0x0b)
	}
	return dst
}

func (w *rewriter) appendExport(dst []byte) []byte {
	dst = appendName(dst, w.opts.TableRequest)
	return appendU32(append(dst, 0x03), w.gReq)
}

// The layout of checkCode: the charge, a 5-byte LEB128 at chargeAt, and
// the test of the fuel left, 3 bytes at testAt (see patchSite).
const (
	chargeLen = 5
	testLen   = 3
)

// checkCode is the check inserted at each site (a function entry, a loop
// head, a point in long code), with a charge of 1 (patchSite sets it):
//
//	global.get $fuel  i32.const CHARGE  i32.sub  global.set $fuel
//	global.get $fuel  i32.eqz nop nop   (or, for a charge above 1: i32.const 1  i32.lt_s)
//	if  call $refill  global.set $fuel  end
//
// The fuel is at least 1 between checks (a refill returns a positive
// amount, and a charge that takes it to 0 or below refills at once), so a
// charge of 1 reaches exactly 0: the test is i32.eqz, as cheap as it gets,
// and the nops cost nothing in compiled code.
func (w *rewriter) checkCode() []byte {
	g := appendU32(nil, w.gFuel)
	var c []byte
	c = append(append(c, 0x23), g...)
	w.chargeAt = len(c) + 1
	c = append(c, 0x41, 0x81, 0x80, 0x80, 0x80, 0x00, 0x6b, 0x24)
	c = append(append(c, g...), 0x23)
	c = append(c, g...)
	w.testAt = len(c)
	c = append(c, 0x45, 0x01, 0x01, 0x04, 0x40, 0x10)
	c = appendU32(c, w.funcImports)
	c = append(append(append(c, 0x24), g...), 0x0b)
	return c
}

// patchSite sets the charge of the check at pos in b, for bytes of code:
// one unit of fuel per unitBytes or part of it.
func (w *rewriter) patchSite(b []byte, pos, bytes int) {
	c := min((bytes+unitBytes-1)/unitBytes, 1<<30)
	c = max(c, 1)
	p := b[pos+w.chargeAt:]
	for i := range chargeLen - 1 {
		p[i] = byte(c>>(7*i))&0x7f | 0x80
	}
	p[chargeLen-1] = byte(c>>28) & 0x7f
	t := b[pos+w.testAt:]
	if c == 1 {
		t[0], t[1], t[2] = 0x45, 0x01, 0x01 // i32.eqz nop nop
	} else {
		t[0], t[1], t[2] = 0x41, 0x01, 0x48 // i32.const 1  i32.lt_s
	}
}

// unitBytes is the code one unit of fuel pays for at a site; bulkShift
// makes a bulk memory or table instruction cost one unit per 2^bulkShift
// bytes or elements it copies or fills. Either is tens of nanoseconds of
// work at most, as a loop iteration or a function entry, the unit of
// Version 5 and before, was.
const (
	unitBytes = 64
	bulkShift = 6
)

// splitBytes is the most code a site pays for before the next: longer
// code (straight-line code, or code that calls many small functions) gets
// sites of its own inside it.
const splitBytes = 8192

// appendBulk appends the code that goes before every bulk memory or table
// instruction, whose count n of bytes or elements is on top of the stack:
// it keeps n in the function's scratch local n, and when n is at least
// bulkSmall it charges n>>bulkShift units and refills if the fuel is
// spent; a smaller one is paid for at its site, as bulkSmall bytes of
// code (expr).
//
//	local.tee $n  local.get $n  i32.const bulkSmall  i32.ge_u
//	if
//	  global.get $fuel  local.get $n  i32.const bulkShift  i32.shr_u  i32.sub  global.set $fuel
//	  global.get $fuel  i32.const 1  i32.lt_s  if  call $refill  global.set $fuel  end
//	end
func (w *rewriter) appendBulk(dst []byte, n uint32) []byte {
	g, l := appendU32(nil, w.gFuel), appendU32(nil, n)
	dst = append(append(dst, 0x22), l...)
	dst = append(append(dst, 0x20), l...)
	dst = appendS32(append(dst, 0x41), bulkSmall)
	dst = append(dst, 0x4f, 0x04, 0x40, 0x23)
	dst = append(append(dst, g...), 0x20)
	dst = append(append(dst, l...), 0x41, bulkShift, 0x76, 0x6b, 0x24)
	dst = append(append(dst, g...), 0x23)
	dst = append(append(dst, g...), 0x41, 0x01, 0x48, 0x04, 0x40, 0x10)
	dst = appendU32(dst, w.funcImports)
	return append(append(append(dst, 0x24), g...), 0x0b, 0x0b)
}

// bulkSmall is the size below which a bulk instruction is paid for at its
// site rather than charged when it runs (under ~100 ns of work).
const bulkSmall = 1024

// growCode goes after table.grow (when Options.TableRequest is set), with
// the growth asked for still in the local $n (appendBulk): when the growth
// was refused (-1), it records the size asked for in $req. The table's
// index goes between its two parts.
//
//	global.set $r  global.get $r  i32.const -1  i32.eq
//	if  table.size T  i64.extend_i32_u  local.get $n  i64.extend_i32_u  i64.add  global.set $req  end
//	global.get $r
func (w *rewriter) growCode() []byte {
	r := appendU32(nil, w.gR)
	var c []byte
	c = append(append(c, 0x24), r...)
	c = append(append(c, 0x23), r...)
	return append(c, 0x41, 0x7f, 0x46, 0x04, 0x40, 0xfc, 0x10)
}

// appendGrow appends growCode for table t, the growth in local n.
func (w *rewriter) appendGrow(dst []byte, t, n uint32) []byte {
	dst = append(dst, w.grow...)
	dst = appendU32(dst, t)
	dst = append(append(dst, 0xad, 0x20), appendU32(nil, n)...)
	dst = append(dst, 0xad, 0x7c, 0x24)
	dst = appendU32(dst, w.gReq)
	dst = append(append(dst, 0x0b, 0x23), appendU32(nil, w.gR)...)
	return dst
}

// rewriters rewrite the sections the instrumentation reads or changes
// (the others are copied as they are): each returns the section's new
// body, or why it cannot.
var rewriters = map[byte]func(w *rewriter, body []byte, base int) ([]byte, error){
	secType:     (*rewriter).typeSection,
	secImport:   (*rewriter).importSection,
	secFunction: (*rewriter).functionSection,
	secTable:    (*rewriter).tableSection,
	secGlobal:   (*rewriter).globalSection,
	secExport:   (*rewriter).exportSection,
	secStart:    (*rewriter).startSection,
	secElement:  (*rewriter).elementSection,
	secCode:     (*rewriter).codeSection,
	secDataCount: func(w *rewriter, body []byte, base int) ([]byte, error) {
		r := reader{b: body, base: base}
		w.dataCnt, w.haveDataCnt = r.u32(), true
		w.dataCount = true
		return body, r.done("data count section")
	},
	secData: func(w *rewriter, body []byte, _ int) ([]byte, error) { return w.dataSection(body), nil },
}

// invalid is an *InvalidError at offset at of the module, in the function
// being written when inCode.
func (w *rewriter) invalid(at int, inCode bool, format string, args ...any) error {
	e := &InvalidError{Func: -1, Offset: at, Msg: fmt.Sprintf(format, args...)}
	if inCode {
		e.Func = int64(w.fnIdx)
		e.Name = w.exports[w.fn(w.fnIdx)]
	}
	return e
}

// tooComplex is an error wrapping ErrTooComplex for the function being
// written.
func (w *rewriter) tooComplex(at int, format string, args ...any) error {
	name := ""
	if n := w.exports[w.fn(w.fnIdx)]; n != "" {
		name = " (" + n + ")"
	}
	return fmt.Errorf("%w: function %d%s, at offset %#x: %s", ErrTooComplex, w.fnIdx, name, at, fmt.Sprintf(format, args...))
}

// checkIndex returns an *InvalidError when idx is not below n, the number
// of what (a plural noun) the module declares.
func (w *rewriter) checkIndex(at int, inCode bool, op string, idx, n uint32, what string) error {
	if idx < n {
		return nil
	}
	return w.invalid(at, inCode, "%s %d: the module declares %d %s", op, idx, n, what)
}

func (w *rewriter) funcs() uint32 { return w.funcImports + uint32(len(w.funcTypes)) }

// ref marks function idx (in range) as one a table or ref.func may hold.
func (w *rewriter) ref(idx uint32) {
	if w.refs == nil {
		w.refs = make([]bool, w.funcs())
	}
	if idx < uint32(len(w.refs)) {
		w.refs[idx] = true
	}
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
			if k == 0 {
				w.typeParams = append(w.typeParams, m)
			}
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
			at := r.i
			if err := w.checkIndex(base+at, false, "import "+mod+"."+name+" of type", r.u32(), w.types, "types"); err != nil && r.err == nil {
				return nil, err
			}
			w.funcImports++
		case 0x01:
			r.valtype()
			r.limits()
			w.tables++
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

func (w *rewriter) functionSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		at := r.i
		t := r.u32()
		if err := w.checkIndex(base+at, false, fmt.Sprintf("function %d has type", w.funcImports+i), t, w.types, "types"); err != nil && r.err == nil {
			return nil, err
		}
		w.funcTypes = append(w.funcTypes, t)
	}
	return body, r.done("function section")
}

// tableSection caps the tables at Options.MaxTableElements: each one's
// maximum becomes at most that, and one whose minimum is larger is refused.
func (w *rewriter) tableSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	dst := appendU32(nil, n)
	limit := uint64(w.opts.MaxTableElements)
	for i := uint32(0); i < n && r.err == nil; i++ {
		s := r.i
		if c := r.byte(); c == 0x40 && r.err == nil { // a table with an initializer (function references)
			return nil, fmt.Errorf("%w: table with an initializer at offset %d", ErrUnsupported, base+s)
		}
		r.i = s
		r.valtype()
		dst = append(dst, body[s:r.i]...)
		at := r.i
		flags := r.byte()
		if flags > 1 && r.err == nil { // shared or 64-bit tables
			return nil, fmt.Errorf("%w: table limits flags 0x%02x at offset %d", ErrUnsupported, flags, base+at)
		}
		lo := r.leb(5)
		hi, hasMax := uint64(0), flags&1 != 0
		if hasMax {
			hi = r.leb(5)
		}
		if r.err != nil {
			break
		}
		if limit != 0 {
			if lo > limit {
				return nil, &TableLimitError{Table: w.tables, Min: lo, Limit: uint32(limit)}
			}
			if !hasMax || hi > limit {
				hasMax, hi = true, limit
			}
		}
		if hasMax {
			dst = appendU32(appendU32(append(dst, 0x01), uint32(lo)), uint32(hi))
		} else {
			dst = appendU32(append(dst, 0x00), uint32(lo))
		}
		w.tables++
	}
	return dst, r.done("table section")
}

func (w *rewriter) globalSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	dst := appendU32(nil, n+w.added())
	for i := uint32(0); i < n && r.err == nil; i++ {
		s := r.i
		r.valtype()
		r.byte()
		dst = append(dst, body[s:r.i]...)
		var err error
		// A global's initializer may name only the globals before it.
		if dst, err = w.constExpr(&r, dst, w.globals+i); err != nil {
			return nil, err
		}
	}
	w.globals += n
	w.haveGlobal = true
	w.setGlobals()
	return w.appendGlobals(dst), r.done("global section")
}

func (w *rewriter) exportSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	extra := uint32(0)
	if w.opts.TableRequest != "" {
		extra = 1
	}
	dst := appendU32(nil, n+extra)
	for i := uint32(0); i < n && r.err == nil; i++ {
		s := r.i
		name := r.name()
		kind := r.byte()
		if name == w.opts.TableRequest && extra == 1 && r.err == nil {
			return nil, fmt.Errorf("module already exports %q, the name the fuel instrumentation uses", name)
		}
		dst = append(dst, body[s:r.i]...)
		at := r.i
		idx := r.u32()
		if r.err != nil {
			break
		}
		var err error
		switch kind {
		case 0x00:
			err = w.checkIndex(base+at, false, fmt.Sprintf("export %q of function", name), idx, w.funcs(), "functions")
			w.ref(idx)
			idx = w.fn(idx)
			if _, ok := w.exports[idx]; !ok {
				if w.exports == nil {
					w.exports = map[uint32]string{}
				}
				w.exports[idx] = name
			}
		case 0x01:
			err = w.checkIndex(base+at, false, fmt.Sprintf("export %q of table", name), idx, w.tables, "tables")
		case 0x03:
			err = w.checkIndex(base+at, false, fmt.Sprintf("export %q of global", name), idx, w.gFuel, "globals")
		}
		if err != nil {
			return nil, err
		}
		dst = appendU32(dst, idx)
	}
	w.haveExport = true
	if extra == 1 {
		dst = w.appendExport(dst)
	}
	return dst, r.done("export section")
}

func (w *rewriter) startSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	idx := r.u32()
	if err := w.checkIndex(base, false, "start function", idx, w.funcs(), "functions"); err != nil && r.err == nil {
		return nil, err
	}
	return appendU32(nil, w.fn(idx)), r.done("start section")
}

func (w *rewriter) elementSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	w.elems = n
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
			at := r.i
			t := r.u32()
			if err := w.checkIndex(base+at, false, fmt.Sprintf("element segment %d's table", i), t, w.tables, "tables"); err != nil && r.err == nil {
				return nil, err
			}
			dst = appendU32(dst, t)
		}
		if flags&1 == 0 { // active: offset expression
			if dst, err = w.constExpr(&r, dst, w.gFuel); err != nil {
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
				at := r.i
				f := r.u32()
				if err := w.checkIndex(base+at, false, fmt.Sprintf("element segment %d's function", i), f, w.funcs(), "functions"); err != nil && r.err == nil {
					return nil, err
				}
				w.ref(f)
				dst = appendU32(dst, w.fn(f))
			} else if dst, err = w.constExpr(&r, dst, w.gFuel); err != nil {
				return nil, err
			}
		}
	}
	return dst, r.done("element section")
}

// constExpr copies a constant expression (an initializer, an offset), in
// which global.get may name only the first globals globals.
func (w *rewriter) constExpr(r *reader, dst []byte, globals uint32) ([]byte, error) {
	saved := w.constGlobals
	w.constGlobals = globals
	defer func() { w.constGlobals = saved }()
	return w.expr(r, dst, false)
}

func (w *rewriter) codeSection(body []byte, base int) ([]byte, error) {
	r := reader{b: body, base: base}
	n := r.u32()
	if r.err != nil {
		return nil, r.errorf("code section")
	}
	if n != uint32(len(w.funcTypes)) {
		return nil, &InvalidError{Func: -1, Offset: base, Msg: fmt.Sprintf("the code section has %d function bodies, the function section declares %d functions", n, len(w.funcTypes))}
	}
	dst := make([]byte, 0, len(body)+len(body)/4)
	dst = appendU32(dst, n)
	var fb []byte
	w.defined, w.codeSeen = n, true
	var err error
	if w.checked, w.cost, err = w.entryChecks(r, n); err != nil {
		return nil, err
	}
	for f, ok := range w.refs {
		switch {
		case !ok, f >= int(w.funcImports)+len(w.checked):
		case uint32(f) < w.funcImports:
			w.maxIndirect = max(w.maxIndirect, hostCallBytes)
		case !w.checked[uint32(f)-w.funcImports]:
			w.maxIndirect = max(w.maxIndirect, w.cost[uint32(f)-w.funcImports])
		}
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
		w.fnIdx = w.funcImports + i
		w.brTargets = 0
		w.locals = uint64(w.typeParams[w.funcTypes[i]])
		groups := fr.u32()
		groupsAt := fr.i
		for j := uint32(0); j < groups && fr.err == nil; j++ {
			w.locals += uint64(fr.u32())
			fr.valtype()
		}
		if fr.err != nil {
			return nil, fr.errorf("locals of function body %d", i)
		}
		// A function with bulk instructions gets a scratch i32 local
		// after its own (appendBulk), which no instruction of the module
		// can name (the index checks).
		w.hasScratch = w.hasBulk[i] && w.locals < 1<<31
		if w.hasScratch {
			w.scratch = uint32(w.locals)
			fb = appendU32(fb[:0], groups+1)
			fb = append(fb, fr.b[groupsAt:fr.i]...)
			fb = append(fb, 0x01, 0x7f)
		} else {
			fb = append(fb[:0], fr.b[bodyStart:fr.i]...)
		}
		// The sites: the entry (see entryChecks for which functions have
		// one), every loop head, and more in long code (expr).
		w.sites, w.ctl = w.sites[:0], w.ctl[:0]
		w.owners = append(w.owners[:0], owner{cur: -1})
		if w.checked[i] {
			fb = w.addSite(fb)
		}
		w.calls = false
		if fb, err = w.expr(&fr, fb, true); err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		for _, st := range w.sites {
			w.patchSite(fb, st.pos, st.bytes)
		}
		if fr.i != len(fr.b) {
			return nil, fmt.Errorf("function body %d: code after its end at offset %d", i, base+fr.i)
		}
		dst = appendU32(dst, uint32(len(fb)))
		dst = append(dst, fb...)
	}
	return dst, r.done("code section")
}

// addSite appends a check to dst, the body being written, and makes it the
// current site of the innermost owner; every block of that owner still
// open now has a site inside it.
func (w *rewriter) addSite(dst []byte) []byte {
	o := &w.owners[len(w.owners)-1]
	o.cur = len(w.sites)
	w.sites = append(w.sites, site{pos: len(dst)})
	for i := o.ctlBase; i < len(w.ctl); i++ {
		w.ctl[i].site = true
	}
	return append(dst, w.check...)
}

// spend adds n bytes of code to the current site of the innermost owner.
func (w *rewriter) spend(n int) {
	if o := w.owners[len(w.owners)-1]; o.cur >= 0 {
		w.sites[o.cur].bytes += n
	}
}

// entryLimit bounds, in bytes of function bodies, the code a call may run
// between two checks through functions that go without an entry check (see
// entryChecks). Loops are checked at every head, so straight-line code is
// all it counts: 2 KiB is at most a few microseconds.
const entryLimit = 2048

// entryChecks decides which of the n defined functions of the code section
// r (at its first body) get a check at their entry, and returns with it
// each function's cost: the bytes of code a call of it may run before a
// check, its own body's and those of the unchecked functions it calls. The
// checks at loop heads bound every loop; the entry checks must bound the
// rest, recursion and chains of calls:
//   - one that calls an import, calls indirectly, or is on a cycle of direct
//     calls (found as the target of a back edge of a depth-first walk, so
//     every cycle has one) gets a check;
//   - any other goes without while its body plus those of the unchecked
//     functions it calls, counted per call site, stay within entryLimit;
//     its callers pay for it, at each call, as that much code.
//
// A body it cannot read makes every function get a check (the rewrite
// proper then reports the error).
func (w *rewriter) entryChecks(r reader, n uint32) ([]bool, []int, error) {
	checked := make([]bool, n)
	size := make([]int, n)
	w.hasBulk = make([]bool, n)
	callees := make([][]uint32, n)
	w.scanning = true
	defer func() { w.scanning = false }()
	var scratch []byte
	for i := uint32(0); i < n; i++ {
		sz := r.u32()
		if r.err != nil || uint64(sz) > uint64(len(r.b)-r.i) {
			return allTrue(checked), allLimit(size), nil
		}
		fr := reader{b: r.b[:r.i+int(sz)], i: r.i, base: r.base}
		r.i += int(sz)
		groups := fr.u32()
		for j := uint32(0); j < groups && fr.err == nil; j++ {
			fr.u32()
			fr.valtype()
		}
		w.calls, w.opaque, w.callees, w.scanBulk = false, false, w.callees[:0], false
		var err error
		if fr.err != nil {
			return allTrue(checked), allLimit(size), nil
		}
		if scratch, err = w.expr(&fr, scratch[:0], true); err != nil {
			return allTrue(checked), allLimit(size), nil
		}
		size[i] = int(sz)
		w.hasBulk[i] = w.scanBulk
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
			if c > entryLimit {
				checked[f] = true
			}
		}
	}
	return checked, cost, nil
}

func allTrue(b []bool) []bool {
	for i := range b {
		b[i] = true
	}
	return b
}

func allLimit(c []int) []int {
	for i := range c {
		c[i] = entryLimit
	}
	return c
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
// closes the expression, checking the indices they name and renumbering
// function indices. In a function body (inCode, not scanning) it also
// writes the sites (see codeSection): a check after every loop's block
// type, one where the code since the last site has grown past splitBytes,
// and one after the end of a block (or at an else) that a site inside it
// could have been skipped by a branch to; and it charges every bulk memory
// and table instruction before it runs (bulkCode).
func (w *rewriter) expr(r *reader, dst []byte, inCode bool) ([]byte, error) {
	depth := 0
	run := r.i // start of the bytes not yet copied
	flush := func(upTo int) { dst = append(dst, r.b[run:upTo]...) }
	emit := inCode && !w.scanning
	check := !w.scanning
	site := func(at int) {
		flush(at)
		dst = w.addSite(dst)
		run = at
	}
	// landing: a site is due before the next instruction that does
	// something (see end, below).
	landing := false
	for {
		if r.err != nil {
			return nil, r.errorf("instruction")
		}
		if r.i >= len(r.b) {
			return nil, fmt.Errorf("expression runs past the end at offset %d", r.base+r.i)
		}
		at := r.i
		if emit {
			switch next := r.b[at]; {
			case landing && next != 0x0b && next != 0x05 && next != 0x07 && next != 0x18 && next != 0x19:
				landing = false
				site(at)
			case landing:
			default:
				if o := w.owners[len(w.owners)-1]; o.cur >= 0 && w.sites[o.cur].bytes >= splitBytes {
					site(at)
				}
			}
		}
		extra := 0 // bytes of code that the instruction runs beyond its own (a call)
		op := r.byte()
		switch {
		case op == 0x0b || op == 0x18: // end, delegate (which ends a try)
			if op == 0x18 {
				r.u32()
			}
			if depth == 0 {
				flush(r.i)
				if emit {
					w.spend(r.i - at)
				}
				return dst, nil
			}
			depth--
			if emit {
				w.spend(r.i - at)
				c := w.ctl[len(w.ctl)-1]
				w.ctl = w.ctl[:len(w.ctl)-1]
				if c.loop {
					// The code after the loop is its owner's, paid for.
					w.owners = w.owners[:len(w.owners)-1]
					landing = false
				} else if c.site {
					// A branch out of the block may have skipped its
					// sites: the code after it pays at a site of its own,
					// written before the next instruction that is not an
					// end (a branch to the block around this one lands
					// after its end, and that block has the same sites).
					landing = true
				}
				continue
			}
		case op == 0x05 || op == 0x07 || op == 0x19: // else, catch, catch_all
			if op == 0x07 {
				r.u32()
			}
			landing = false // the arm before ends here: its code is done
			if emit && len(w.ctl) > 0 && w.ctl[len(w.ctl)-1].site {
				// This arm is entered by a branch past the sites of the
				// one before.
				w.spend(r.i - at)
				site(r.i)
				continue
			}
		case op == 0x02 || op == 0x04 || op == 0x06: // block, if, try
			if err := w.blocktype(r, at, check, inCode); err != nil {
				return nil, err
			}
			depth++
			if check && depth > MaxDepth {
				return nil, w.tooComplex(r.base+at, "blocks nest more than %d deep", MaxDepth)
			}
			if emit {
				w.ctl = append(w.ctl, ctlEntry{})
			}
		case op == 0x03: // loop
			if err := w.blocktype(r, at, check, inCode); err != nil {
				return nil, err
			}
			depth++
			if check && depth > MaxDepth {
				return nil, w.tooComplex(r.base+at, "blocks nest more than %d deep", MaxDepth)
			}
			if emit {
				w.spend(r.i - at)
				w.ctl = append(w.ctl, ctlEntry{loop: true})
				w.owners = append(w.owners, owner{cur: -1, ctlBase: len(w.ctl)})
				site(r.i)
				continue
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
			if emit {
				w.ctl = append(w.ctl, ctlEntry{})
			}
		case op == 0x10 || op == 0x12 || op == 0xd2: // call, return_call, ref.func
			idx := r.u32()
			if r.err != nil {
				continue
			}
			if check {
				name := map[byte]string{0x10: "call", 0x12: "return_call", 0xd2: "ref.func"}[op]
				if err := w.checkIndex(r.base+at, inCode, name, idx, w.funcs(), "functions"); err != nil {
					return nil, err
				}
			}
			if op == 0xd2 && !inCode {
				w.ref(idx)
			}
			if op != 0xd2 {
				w.calls = true
				if w.scanning {
					w.callees = append(w.callees, idx)
				}
				switch {
				case idx < w.funcImports:
					extra = hostCallBytes
				case emit && !w.checked[idx-w.funcImports]:
					extra = w.cost[idx-w.funcImports]
				}
			}
			flush(at)
			dst = appendU32(append(dst, op), w.fn(idx))
			run = r.i
		case op <= 0x01, op == 0x0f, op == 0x1a, op == 0x1b,
			op >= 0x45 && op <= 0xc4, op == 0xd1, op == 0xd3, op == 0xd5:
			// no immediates
		case op == 0x08, op == 0x09, op == 0x0c, op == 0x0d, op == 0x3f, op == 0x40, op == 0xd4, op == 0xd6:
			r.u32()
		case op >= 0x20 && op <= 0x22: // local.get, local.set, local.tee
			idx := r.u32()
			if check && r.err == nil && !inCode {
				return nil, w.invalid(r.base+at, false, "a local instruction in a constant expression")
			}
			if check && r.err == nil && uint64(idx) >= w.locals {
				return nil, w.invalid(r.base+at, true, "%s %d: the function has %d locals (parameters included)",
					[]string{"local.get", "local.set", "local.tee"}[op-0x20], idx, w.locals)
			}
		case op == 0x23 || op == 0x24: // global.get, global.set
			idx := r.u32()
			n := w.gFuel
			if !inCode {
				n = w.constGlobals
			}
			if check && r.err == nil {
				if err := w.checkIndex(r.base+at, inCode, []string{"global.get", "global.set"}[op-0x23], idx, n, "globals"); err != nil {
					return nil, err
				}
			}
		case op == 0x25 || op == 0x26: // table.get, table.set
			idx := r.u32()
			if check && r.err == nil {
				if err := w.checkIndex(r.base+at, inCode, []string{"table.get", "table.set"}[op-0x25], idx, w.tables, "tables"); err != nil {
					return nil, err
				}
			}
		case op == 0x0e: // br_table
			n := r.u32()
			if w.brTargets += int(min(n, 1<<30)) + 1; check && w.brTargets > MaxBrTableTargets {
				return nil, w.tooComplex(r.base+at, "its br_tables have more than %d targets", MaxBrTableTargets)
			}
			for i := uint32(0); i <= n && r.err == nil; i++ {
				r.u32()
			}
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			t, tab := r.u32(), r.u32()
			if check && r.err == nil {
				if err := w.checkIndex(r.base+at, inCode, "call_indirect of type", t, w.types, "types"); err != nil {
					return nil, err
				}
				if err := w.checkIndex(r.base+at, inCode, "call_indirect through table", tab, w.tables, "tables"); err != nil {
					return nil, err
				}
			}
			w.calls, w.opaque = true, true
			if emit {
				extra = w.maxIndirect
			}
		case op == 0x14 || op == 0x15: // call_ref, return_call_ref
			t := r.u32()
			if check && r.err == nil {
				if err := w.checkIndex(r.base+at, inCode, "call_ref of type", t, w.types, "types"); err != nil {
					return nil, err
				}
			}
			w.calls, w.opaque = true, true
			if emit {
				extra = w.maxIndirect
			}
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
			if err := w.blocktype(r, at, check, inCode); err != nil { // a heap type is an s33 like a block type
				return nil, err
			}
		case op == 0xfc:
			sub, imm, err := w.prefixFC(r, at, check, inCode)
			if err != nil {
				return nil, err
			}
			if w.scanning && bulk(sub) {
				w.scanBulk = true
			}
			if emit && bulk(sub) {
				if !w.hasScratch {
					return nil, fmt.Errorf("%w: a bulk instruction at offset %d the scan did not see", ErrUnsupported, r.base+at)
				}
				flush(at)
				dst = w.appendBulk(dst, w.scratch)
				run = at
				extra = bulkSmall
				if sub == 15 && w.opts.TableRequest != "" { // table.grow
					w.spend(r.i - at + extra)
					flush(r.i)
					dst = w.appendGrow(dst, imm, w.scratch)
					run = r.i
					continue
				}
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
		if emit {
			w.spend(r.i - at + extra)
		}
	}
}

// hostCallBytes is what a call of an import counts as, in bytes of code.
// (The host's own functions look at the call's deadline themselves; see
// runtime.)
const hostCallBytes = unitBytes

// bulk reports whether 0xfc sub is a bulk instruction whose count of bytes
// or elements is on top of the stack: memory.init, memory.copy,
// memory.fill, table.init, table.copy, table.grow, table.fill.
func bulk(sub uint32) bool {
	switch sub {
	case 8, 10, 11, 12, 14, 15, 17:
		return true
	}
	return false
}

// blocktype reads a block type (or a heap type), checking a type index.
func (w *rewriter) blocktype(r *reader, at int, check, inCode bool) error {
	t := r.s33()
	if check && r.err == nil && t >= 0 {
		return w.checkIndex(r.base+at, inCode, "block of type", uint32(min(t, 1<<32-1)), w.types, "types")
	}
	return nil
}

// prefixFC reads an 0xfc instruction's immediates after the prefix,
// checking the indices, and returns its sub-opcode and its first index
// (table.grow's table).
func (w *rewriter) prefixFC(r *reader, at int, check, inCode bool) (uint32, uint32, error) {
	sub := r.u32()
	var a, b uint32
	switch {
	case sub <= 7:
	case sub == 8, sub == 10, sub == 12, sub == 14:
		a, b = r.u32(), r.u32()
	case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
		a = r.u32()
	default:
		if r.err == nil {
			return 0, 0, fmt.Errorf("%w: opcode 0xfc %d at offset %d", ErrUnsupported, sub, r.base+at)
		}
	}
	if !check || r.err != nil {
		return sub, a, nil
	}
	data := func(op string, idx uint32) error {
		if !w.haveDataCnt {
			return w.invalid(r.base+at, inCode, "%s %d: the module has no data count section", op, idx)
		}
		return w.checkIndex(r.base+at, inCode, op, idx, w.dataCnt, "data segments")
	}
	tables := func(op string, idx uint32) error { return w.checkIndex(r.base+at, inCode, op, idx, w.tables, "tables") }
	elems := func(op string, idx uint32) error {
		return w.checkIndex(r.base+at, inCode, op, idx, w.elems, "element segments")
	}
	var err error
	switch sub {
	case 8:
		err = data("memory.init of data segment", a)
	case 9:
		err = data("data.drop of data segment", a)
	case 12:
		if err = elems("table.init of element segment", a); err == nil {
			err = tables("table.init into table", b)
		}
	case 13:
		err = elems("elem.drop of element segment", a)
	case 14:
		if err = tables("table.copy into table", a); err == nil {
			err = tables("table.copy from table", b)
		}
	case 15:
		err = tables("table.grow of table", a)
	case 16:
		err = tables("table.size of table", a)
	case 17:
		err = tables("table.fill of table", a)
	}
	return sub, a, err
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
