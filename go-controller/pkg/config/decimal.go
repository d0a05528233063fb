package config

import (
	"fmt"
	"strconv"
)

// parseDecimal parses a flag's number as people write it: decimal digits
// only, no sign, no leading zero, no spaces, between lo and hi. strconv.Atoi
// alone would take "-1", "+24" and "024".
func parseDecimal(s string, lo, hi int) (int, error) {
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%q is not a number (decimal digits only)", s)
		}
	}
	switch {
	case s == "":
		return 0, fmt.Errorf("is empty")
	case len(s) > 1 && s[0] == '0':
		return 0, fmt.Errorf("%q has a leading zero", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s is outside %d..%d", s, lo, hi)
	}
	return n, nil
}
