package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// This file keeps config.json as the person wrote it: Store.Patch decodes
// the file into ordered values (an object is its members in file order),
// merges the patch into them and writes them back in that order, so a patch
// moves no key and keeps the keys it does not name, comment keys included.

// member is one key of a JSON object.
type member struct {
	key string
	val any
}

// object is a JSON object with its keys in order. Values are *object,
// []any, string, json.Number, bool or nil.
type object struct{ members []member }

func (o *object) index(k string) int {
	for i, m := range o.members {
		if m.key == k {
			return i
		}
	}
	return -1
}

func (o *object) get(k string) (any, bool) {
	if i := o.index(k); i >= 0 {
		return o.members[i].val, true
	}
	return nil, false
}

// set replaces k's value where k is, or appends k.
func (o *object) set(k string, v any) {
	if i := o.index(k); i >= 0 {
		o.members[i].val = v
		return
	}
	o.members = append(o.members, member{k, v})
}

func (o *object) del(k string) {
	if i := o.index(k); i >= 0 {
		o.members = append(o.members[:i], o.members[i+1:]...)
	}
}

// isComment reports whether k is a comment key of config.json: one that
// starts with "//" ({"//": "port 18800: 18789 is OpenClaw's"}, {"// model":
// "…"}). Load ignores them and Store.Patch keeps them, so a person may
// annotate the file; any other unknown key is an error (a typo is never
// ignored).
func isComment(k string) bool { return strings.HasPrefix(k, "//") }

// hasComment reports whether any object in v has a comment key.
func hasComment(v any) bool {
	switch t := v.(type) {
	case *object:
		for _, m := range t.members {
			if isComment(m.key) || hasComment(m.val) {
				return true
			}
		}
	case []any:
		for _, x := range t {
			if hasComment(x) {
				return true
			}
		}
	}
	return false
}

// decodeOrdered decodes one JSON value keeping the order of object keys. A
// key given twice keeps its first place and its last value (as
// encoding/json keeps the last value).
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &json.SyntaxError{Offset: dec.InputOffset()}
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o.set(k, v)
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// encodeOrdered writes v as indented JSON (two spaces), objects in their
// order, strings without HTML escaping (a "<" stays "<").
func encodeOrdered(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeValue(&buf, v); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func writeValue(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case *object:
		buf.WriteByte('{')
		for i, m := range t.members {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeString(buf, m.key); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeValue(buf, m.val); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeValue(buf, x); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case string:
		return writeString(buf, t)
	case json.Number:
		buf.WriteString(t.String())
	case bool, nil:
		b, _ := json.Marshal(t)
		buf.Write(b)
	default:
		return fmt.Errorf("encode config: unexpected %T", v)
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return nil
}

// mergeOrdered applies patch to target as RFC 7386 says (an object's keys
// replace or, when null, remove the same keys; nested objects merge),
// keeping target's key order; new keys go last, in the patch's order.
func mergeOrdered(target, patch any) any {
	p, ok := patch.(*object)
	if !ok {
		return patch
	}
	t, ok := target.(*object)
	if !ok {
		t = &object{}
	}
	for _, m := range p.members {
		if m.val == nil {
			t.del(m.key)
			continue
		}
		cur, _ := t.get(m.key)
		t.set(m.key, mergeOrdered(cur, m.val))
	}
	return t
}

// dropKeys removes, from every object in v, the keys drop says.
func dropKeys(v any, drop func(string) bool) {
	switch t := v.(type) {
	case *object:
		kept := t.members[:0]
		for _, m := range t.members {
			if !drop(m.key) {
				kept = append(kept, m)
			}
		}
		t.members = kept
		for _, m := range t.members {
			dropKeys(m.val, drop)
		}
	case []any:
		for _, x := range t {
			dropKeys(x, drop)
		}
	}
}
