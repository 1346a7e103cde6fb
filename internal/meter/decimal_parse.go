package meter

// decimalBufSize holds the longest plain notation: a sign, "0." and
// MaxScale digits, or a sign, MaxPrecision digits and a point.
const decimalBufSize = 48

// Reasons a decimal is rejected; each follows the quoted input.
const (
	reasonNotDecimal = "is not a decimal number"
	reasonExponent   = "exponent out of range"
	reasonPrecision  = "has more than 38 significant digits"
	reasonScale      = "has more than 38 digits after the decimal point"
)

// number is the shape of a JSON number, as offsets into its text.
type number struct {
	neg                bool
	intStart, intEnd   int
	fracStart, fracEnd int
	expNeg             bool
	expStart, expEnd   int // the exponent's digits; equal if there is no exponent
}

// splitNumber matches b against the JSON number grammar.
func splitNumber(b []byte) (number, bool) {
	var n number
	i := 0
	if i < len(b) && b[i] == '-' {
		n.neg = true
		i++
	}
	n.intStart = i
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return n, false
	}
	n.intEnd = i
	n.fracStart, n.fracEnd = i, i
	if i < len(b) && b[i] == '.' {
		i++
		n.fracStart = i
		i = skipDigits(b, i)
		n.fracEnd = i
		if n.fracEnd == n.fracStart {
			return n, false
		}
	}
	n.expStart, n.expEnd = i, i
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			n.expNeg = b[i] == '-'
			i++
		}
		n.expStart = i
		i = skipDigits(b, i)
		n.expEnd = i
		if n.expEnd == n.expStart {
			return n, false
		}
	}
	return n, i == len(b)
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// exponent returns the exponent's value, or false if it is beyond
// ±MaxExponent. It looks at no more than a few digits, however many there are.
func (n number) exponent(b []byte) (int, bool) {
	i := n.expStart
	for i < n.expEnd && b[i] == '0' {
		i++
	}
	if n.expEnd-i > 3 {
		return 0, false
	}
	e := 0
	for ; i < n.expEnd; i++ {
		e = e*10 + int(b[i]-'0')
	}
	if e > MaxExponent {
		return 0, false
	}
	if n.expNeg {
		e = -e
	}
	return e, true
}

// appendDecimal parses b as a decimal and appends its plain notation to dst.
// On failure it returns a non-empty reason and dst unchanged.
func appendDecimal(dst, b []byte) (out []byte, scale, sign int, reason string) {
	n, ok := splitNumber(b)
	if !ok {
		return dst, 0, 0, reasonNotDecimal
	}
	exp, ok := n.exponent(b)
	if !ok {
		return dst, 0, 0, reasonExponent
	}

	// The value is digits × 10^(exp - fracLen), where digits is the integer
	// part followed by the fraction. Size it before building anything.
	fracLen := n.fracEnd - n.fracStart
	digits := n.intEnd - n.intStart + fracLen
	lead := 0 // leading zeros of digits
	if b[n.intStart] == '0' {
		lead = 1
		for j := n.fracStart; j < n.fracEnd && b[j] == '0'; j++ {
			lead++
		}
	}
	zero := lead == digits
	scale = max(0, fracLen-exp)
	pad := max(0, exp-fracLen) // zeros appended to the coefficient
	precision := 1
	if !zero {
		precision = digits - lead + pad
	}
	if precision > MaxPrecision {
		return dst, 0, 0, reasonPrecision
	}
	if scale > MaxScale {
		return dst, 0, 0, reasonScale
	}

	// The coefficient: significant digits, then the zeros of a positive exponent.
	var cbuf [MaxPrecision]byte
	c := cbuf[:0]
	if zero {
		c = append(c, '0')
	} else {
		k := 0
		for _, part := range [2][2]int{{n.intStart, n.intEnd}, {n.fracStart, n.fracEnd}} {
			for j := part[0]; j < part[1]; j++ {
				if k >= lead {
					c = append(c, b[j])
				}
				k++
			}
		}
		for range pad {
			c = append(c, '0')
		}
		sign = 1
		if n.neg {
			sign = -1
			dst = append(dst, '-')
		}
	}

	switch {
	case scale == 0:
		dst = append(dst, c...)
	case len(c) > scale:
		dst = append(dst, c[:len(c)-scale]...)
		dst = append(dst, '.')
		dst = append(dst, c[len(c)-scale:]...)
	default:
		dst = append(dst, '0', '.')
		for range scale - len(c) {
			dst = append(dst, '0')
		}
		dst = append(dst, c...)
	}
	return dst, scale, sign, ""
}
