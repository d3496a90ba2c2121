package dolphin

// The binding's errors and the core's error messages. The core returns an error code and a detail value
// (errorDetail()); the message is the template from spec/abi.json (generated into abi_gen.go) with {detail} written
// as JavaScript's String(number) writes it, so every host prints the same text for the same failure.

import (
	"math"
	"strconv"
	"strings"
)

// Error is a call the core refused: Code is the spec's error code, Detail the value or index it was about.
type Error struct {
	Code    int
	Name    string
	Detail  float64
	Context string
}

func (e *Error) Error() string {
	msg := coreErrorMessage(e.Code, e.Detail)
	if e.Context != "" {
		return e.Context + ": " + msg
	}
	return msg
}

// TableError is a table file the core's decoder rejected; Field names the failing field (e.g. "bits[2]").
type TableError struct {
	Field   string
	Message string
}

func (e *TableError) Error() string { return e.Message }

// RequestError is an argument refused before it reached the core (same messages as the Node host).
type RequestError struct{ Message string }

func (e *RequestError) Error() string { return e.Message }

func newCoreError(code int, detail float64, context string) *Error {
	name := "UNKNOWN"
	if code >= 0 && code < len(errorMessages) && errorMessages[code].name != "" {
		name = errorMessages[code].name
	}
	return &Error{Code: code, Name: name, Detail: detail, Context: context}
}

// coreErrorMessage is a code's message: the by_detail entry for this exact detail, else the template.
func coreErrorMessage(code int, detail float64) string {
	d := jsNumber(detail)
	if code <= 0 || code >= len(errorMessages) || errorMessages[code].name == "" {
		return "core: error " + strconv.Itoa(code) + " (detail " + d + ")"
	}
	entry := errorMessages[code]
	template := entry.message
	if t, ok := entry.byDetail[d]; ok {
		template = t
	}
	return strings.ReplaceAll(template, "{detail}", d)
}

// jsNumber writes x as JavaScript's String(x) does (Number::toString, ECMA-262 §6.1.6.1.20): strconv gives the
// same shortest round-trip digits; only the layout differs (JS writes 1e21 but 100000000000000000000 for 1e20).
func jsNumber(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "Infinity"
	case math.IsInf(x, -1):
		return "-Infinity"
	case x == 0:
		return "0"
	}
	sign := ""
	if x < 0 {
		sign, x = "-", -x
	}
	e := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±XX
	mantissa, expText, _ := strings.Cut(e, "e")
	exponent, _ := strconv.Atoi(expText)
	digits := strings.TrimRight(strings.Replace(mantissa, ".", "", 1), "0")
	if digits == "" {
		digits = "0"
	}
	k, n := len(digits), exponent+1 // value = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	exp := "e+" + strconv.Itoa(n-1)
	if n-1 < 0 {
		exp = "e-" + strconv.Itoa(1-n)
	}
	if k == 1 {
		return sign + digits + exp
	}
	return sign + digits[:1] + "." + digits[1:] + exp
}
