package topology

import "strings"

// MatchReferences lists the address sets ($name) and port groups (@name) an
// OVN match expression names, in order of appearance, each once. OVN
// ignores a logical flow whose match names a set or group that does not
// exist, so an ACL naming a missing one silently does nothing: callers
// check these against the database.
func MatchReferences(match string) (addressSets, portGroups []string) {
	seen := map[string]bool{}
	inQuote := false
	for i := 0; i < len(match); i++ {
		c := match[i]
		if c == '"' {
			inQuote = !inQuote
			continue
		}
		if inQuote || c != '$' && c != '@' {
			continue
		}
		j := i + 1
		for j < len(match) && isIdentByte(match[j]) {
			j++
		}
		name := match[i+1 : j]
		if name == "" || seen[string(c)+name] {
			i = j - 1
			continue
		}
		seen[string(c)+name] = true
		if c == '$' {
			addressSets = append(addressSets, name)
		} else {
			portGroups = append(portGroups, name)
		}
		i = j - 1
	}
	return addressSets, portGroups
}

// PortGroupOfAddressSet names the port group whose automatic address set
// this is (OVN makes <group>_ip4 and <group>_ip6 for every port group), or "".
func PortGroupOfAddressSet(name string) string {
	for _, suffix := range []string{"_ip4", "_ip6"} {
		if g, ok := strings.CutSuffix(name, suffix); ok {
			return g
		}
	}
	return ""
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
