package ovndb

import (
	"fmt"
	"reflect"
	"sort"
)

// fieldIndex finds which field of the struct behind structPtr the pointer
// fieldPtr addresses, so a column named by a pointer into the desired row can
// be read from the cached row too.
func fieldIndex(structPtr, fieldPtr any) (int, error) {
	sv := reflect.ValueOf(structPtr).Elem()
	target := reflect.ValueOf(fieldPtr).Pointer()
	for i := 0; i < sv.NumField(); i++ {
		if sv.Field(i).Addr().Pointer() == target && sv.Field(i).Addr().Type() == reflect.TypeOf(fieldPtr) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("field pointer %T is not a field of %T", fieldPtr, structPtr)
}

// columnEqual compares two values of one OVSDB column. Sets are unordered and
// an empty set or map equals a nil one, as the database does not tell them apart.
func columnEqual(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		if a.Len() == 0 {
			return true
		}
		if a.Type().Elem().Kind() == reflect.String {
			x, y := sortedStrings(a), sortedStrings(b)
			for i := range x {
				if x[i] != y[i] {
					return false
				}
			}
			return true
		}
		return reflect.DeepEqual(a.Interface(), b.Interface())
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		if a.Len() == 0 {
			return true
		}
		return reflect.DeepEqual(a.Interface(), b.Interface())
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return reflect.DeepEqual(a.Elem().Interface(), b.Elem().Interface())
	default:
		return reflect.DeepEqual(a.Interface(), b.Interface())
	}
}

func sortedStrings(v reflect.Value) []string {
	out := make([]string, v.Len())
	for i := range out {
		out[i] = v.Index(i).String()
	}
	sort.Strings(out)
	return out
}

// changedFields returns the fields (pointers into want) whose values differ
// from the cached row.
func changedFields(cached, want any, fields []any) ([]any, error) {
	cv := reflect.ValueOf(cached).Elem()
	wv := reflect.ValueOf(want).Elem()
	var changed []any
	for _, f := range fields {
		i, err := fieldIndex(want, f)
		if err != nil {
			return nil, err
		}
		if !columnEqual(cv.Field(i), wv.Field(i)) {
			changed = append(changed, f)
		}
	}
	return changed, nil
}
