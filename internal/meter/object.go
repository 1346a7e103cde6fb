package meter

import "bytes"

// keySet is the set of names of one object: d.keys[start:d.nkeys], or seen
// once it has outgrown them.
type keySet struct {
	start int
	seen  map[string]struct{}
}

// objectStart consumes the '{' at d.pos, and the '}' too if the object is
// empty.
func (d *decoder) objectStart() (ks keySet, empty bool, fe *FieldError) {
	if d.depth++; d.depth > maxDepth {
		return ks, false, d.syntaxError("nesting too deep")
	}
	d.pos++
	ks.start = d.nkeys
	d.skipSpace()
	if d.peek() == '}' {
		d.pos++
		d.depth--
		return ks, true, nil
	}
	return ks, false, nil
}

// objectKey reads a member's name and the ':' after it, and rejects a name
// the object already has.
func (d *decoder) objectKey(ks *keySet) ([]byte, *FieldError) {
	d.skipSpace()
	if d.peek() != '"' {
		return nil, d.unexpected()
	}
	key, fe := d.readString()
	if fe != nil {
		return nil, fe
	}
	if fe := d.addKey(ks, key); fe != nil {
		return nil, fe
	}
	d.skipSpace()
	if d.peek() != ':' {
		return nil, d.unexpected()
	}
	d.pos++
	d.skipSpace()
	return key, nil
}

func (d *decoder) addKey(ks *keySet, key []byte) *FieldError {
	if ks.seen == nil {
		for _, k := range d.keys[ks.start:d.nkeys] {
			if bytes.Equal(k, key) {
				return bodyError("duplicate key " + quote(key))
			}
		}
		if d.nkeys < len(d.keys) && d.nkeys-ks.start < linearKeys {
			d.keys[d.nkeys] = key
			d.nkeys++
			return nil
		}
		ks.seen = make(map[string]struct{}, 2*linearKeys)
		for _, k := range d.keys[ks.start:d.nkeys] {
			ks.seen[string(k)] = struct{}{}
		}
	}
	if _, dup := ks.seen[string(key)]; dup {
		return bodyError("duplicate key " + quote(key))
	}
	ks.seen[string(key)] = struct{}{}
	return nil
}

// objectNext consumes the ',' (more is true) or the '}' after a member.
func (d *decoder) objectNext(ks keySet) (more bool, fe *FieldError) {
	d.skipSpace()
	switch d.peek() {
	case ',':
		d.pos++
		return true, nil
	case '}':
		d.pos++
		d.depth--
		d.nkeys = ks.start
		return false, nil
	}
	return false, d.unexpected()
}

func (d *decoder) skipObject() *FieldError {
	ks, empty, fe := d.objectStart()
	for more := !empty; fe == nil && more; {
		if _, fe = d.objectKey(&ks); fe != nil {
			break
		}
		if fe = d.skipValue(); fe != nil {
			break
		}
		more, fe = d.objectNext(ks)
	}
	return fe
}

func (d *decoder) skipArray() *FieldError {
	if d.depth++; d.depth > maxDepth {
		return d.syntaxError("nesting too deep")
	}
	d.pos++
	d.skipSpace()
	if d.peek() == ']' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		d.skipSpace()
		if fe := d.skipValue(); fe != nil {
			return fe
		}
		d.skipSpace()
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			d.depth--
			return nil
		default:
			return d.unexpected()
		}
	}
}
