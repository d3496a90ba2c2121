package dolphin

// A request to route: its fields, the predicted output length it routes with (given, from its output-length
// class, or left to the table's model), and its copy into the core's input buffer and request record.

import (
	"slices"
	"strconv"
	"strings"
)

// Request is one request to route: exactly one of Tokens, Text or BlockHashes. Its predicted output length is OSLHat
// when given, else the representative length of the output-length class OSLClassName or OSLClassIndex picks (in the
// table's osl_classes: Table().OSLClassNames), else what the table's output-length model predicts (0 without one).
type Request struct {
	Tokens           []uint32
	Text             string
	BlockHashes      []uint64
	PromptTokens     int      // isl in text and hash modes (0: derived from the input)
	OSLHat           *float64 // predicted output tokens; nil: not given
	OSLClassName     string   // the class by name; "": none
	OSLClassIndex    *int     // the class by index (Int(i)); nil: none
	Turn             int      // the turn in its session (1 = first); 0: 1, the Node default
	DecodeWorker     string   // pin the decode worker (a session's); "": none
	ContextTokens    *float64 // session context the prompt repeats (PPD); nil: unknown
	PrevOutputTokens float64  // the session's previous output tokens (≤ 0 unknown)
	MaxTokens        float64  // the request's max_tokens (≤ 0 not given)
	text             bool     // Text was set (an empty string is still a text prompt)
}

// Float returns a pointer to v, for Request.OSLHat and Request.ContextTokens.
func Float(v float64) *float64 { return &v }

// Int returns a pointer to v, for Request.OSLClassIndex.
func Int(v int) *int { return &v }

// TextRequest is a Request for a text prompt (64-byte blocks).
func TextRequest(text string) Request { return Request{Text: text, text: true} }

func (r *Router) oslHat(req *Request) (float64, error) {
	if req.OSLHat != nil {
		if !(*req.OSLHat >= 0) {
			return 0, &RequestError{"route: oslHat must be a number ≥ 0, got " + jsNumber(*req.OSLHat)}
		}
		return *req.OSLHat, nil
	}
	if req.OSLClassName != "" || req.OSLClassIndex != nil {
		return r.classLength(req)
	}
	if r.table.OSLModel {
		return -1, nil
	}
	for _, f := range r.table.Features {
		if f == "osl_hat" {
			return 0, &RequestError{"route: this table uses osl_hat and has no output-length model: give oslHat or oslClass"}
		}
	}
	return 0, nil
}

// classLength is the representative length of the request's output-length class, with the Node host's messages
// (src/router.ts oslHatOf; the class shown as JSON.stringify shows it).
func (r *Router) classLength(req *Request) (float64, error) {
	if req.OSLClassName != "" && req.OSLClassIndex != nil {
		return 0, &RequestError{"route: give OSLClassName or OSLClassIndex, not both"}
	}
	names := r.table.OSLClassNames
	if len(names) == 0 {
		return 0, &RequestError{"route: oslClass given but the table has no osl_classes"}
	}
	i, shown := slices.Index(names, req.OSLClassName), jsQuote(req.OSLClassName, false)
	if req.OSLClassIndex != nil {
		i, shown = *req.OSLClassIndex, strconv.Itoa(*req.OSLClassIndex)
	}
	if i < 0 || i >= len(names) {
		classes := strings.Join(names, ", ")
		return 0, &RequestError{"route: unknown oslClass " + shown + " (table classes: " + classes + ")"}
	}
	return r.table.OSLClassRepresentative[i], nil
}

func (r *Router) run(req *Request, record bool) error {
	c := r.c
	flags := 0
	if record {
		flags |= flagRecord
	}
	given := 0
	if req.Tokens != nil {
		given++
	}
	if req.text || req.Text != "" {
		given++
	}
	if req.BlockHashes != nil {
		given++
	}
	if given != 1 {
		return &RequestError{"route: give exactly one of tokens, text or blockHashes"}
	}
	var length int
	switch {
	case req.text || req.Text != "":
		if err := c.writeBytes([]byte(req.Text), "route"); err != nil {
			return err
		}
		length, flags = len(req.Text), flags|flagText
	case req.BlockHashes != nil:
		if err := c.writeU64s(req.BlockHashes, "route"); err != nil {
			return err
		}
		length, flags = len(req.BlockHashes), flags|flagHashes
	default:
		if err := c.writeU32s(req.Tokens, "route"); err != nil {
			return err
		}
		length = len(req.Tokens)
	}
	pinned := -1
	if req.DecodeWorker != "" {
		i, err := r.indexOf(req.DecodeWorker)
		if err != nil {
			return err
		}
		pinned = i
	}
	osl, err := r.oslHat(req)
	if err != nil {
		return err
	}
	turn := req.Turn
	if turn == 0 {
		turn = 1
	}
	ctxTokens := -1.0
	if req.ContextTokens != nil {
		ctxTokens = *req.ContextTokens
	}
	q := c.request
	c.setF64(q, rLength, float64(length))
	c.setF64(q, rFlags, float64(flags))
	c.setF64(q, rPromptTokens, float64(req.PromptTokens))
	c.setF64(q, rOslHat, osl)
	c.setF64(q, rTurn, float64(turn))
	c.setF64(q, rPinnedDecode, float64(pinned))
	c.setF64(q, rContextTokens, ctxTokens)
	c.setF64(q, rPrevOutputTokens, req.PrevOutputTokens)
	c.setF64(q, rMaxTokens, req.MaxTokens)
	return c.check(c.call("route"), "route")
}
