package model

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
)

// Image bounds. Each provider sends an image inline, base64-encoded, in
// the request body; these caps keep one request within what the APIs
// accept (Anthropic refuses an image over 5 MB; OpenAI's limit is higher)
// and within the memory one call may take.
const (
	// MaxImageBase64Bytes caps one image as sent: its base64 text, in
	// bytes (5 MiB, i.e. a file of at most 3.75 MiB). A larger image is
	// an ErrImage error; it is not downscaled.
	MaxImageBase64Bytes = 5 << 20
	// MaxImagesPerRequest caps the images of one request (all messages
	// together). More is an ErrImage error.
	MaxImagesPerRequest = 8
)

// ImageMIMETypes are the image types every provider here accepts (the
// four both the OpenAI and the Anthropic Messages APIs list).
var ImageMIMETypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// Image is one picture given to a model with a message: either the file
// at Path (read when the request is encoded) or Data. MIME is its type
// (one of ImageMIMETypes); empty means "sniff the bytes"
// (http.DetectContentType). A stated MIME the bytes contradict is
// corrected from the bytes.
//
// In the JSON form (the transcript, a worker process) Data is base64.
type Image struct {
	Path string `json:"path,omitempty"`
	Data []byte `json:"data,omitempty"`
	MIME string `json:"mime,omitempty"`
}

// ErrImage: an image cannot be sent: it is too large
// (MaxImageBase64Bytes), there are too many (MaxImagesPerRequest), it is
// not one of ImageMIMETypes, or its file cannot be read. Nothing was sent.
var ErrImage = errors.New("image cannot be sent to the model")

// loadedImage is an image ready for the wire.
type loadedImage struct {
	mime string
	b64  string
}

// dataURL is the image as a data: URL (OpenAI-compatible image_url).
func (l loadedImage) dataURL() string { return "data:" + l.mime + ";base64," + l.b64 }

// maxImageFileBytes is the largest file whose base64 fits MaxImageBase64Bytes.
const maxImageFileBytes = MaxImageBase64Bytes / 4 * 3

// load reads and checks img.
func (img Image) load() (loadedImage, error) {
	name := "an image"
	data := img.Data
	if img.Path != "" {
		name = img.Path
		f, err := os.Open(img.Path)
		if err != nil {
			return loadedImage{}, newErr(ErrImage, err, "cannot read image %s", img.Path)
		}
		defer f.Close()
		data, err = io.ReadAll(io.LimitReader(f, maxImageFileBytes+1))
		if err != nil {
			return loadedImage{}, newErr(ErrImage, err, "cannot read image %s", img.Path)
		}
	}
	if len(data) == 0 {
		return loadedImage{}, newErr(ErrImage, nil, "%s is empty", name)
	}
	if n := base64.StdEncoding.EncodedLen(len(data)); n > MaxImageBase64Bytes {
		return loadedImage{}, newErr(ErrImage, nil, "%s is too large for the model: %s as base64 (at most %s; images are not downscaled)",
			name, sizeText(int64(n)), sizeText(MaxImageBase64Bytes))
	}
	mime := strings.ToLower(strings.TrimSpace(img.MIME))
	if sniffed := http.DetectContentType(data); slices.Contains(ImageMIMETypes, sniffed) {
		mime = sniffed
	}
	if !slices.Contains(ImageMIMETypes, mime) {
		return loadedImage{}, newErr(ErrImage, nil, "%s is not an image the model takes (type %q; want one of %s)",
			name, mime, strings.Join(ImageMIMETypes, ", "))
	}
	return loadedImage{mime: mime, b64: base64.StdEncoding.EncodeToString(data)}, nil
}

// loadImages loads every image of msgs, by message index, after checking
// their count against MaxImagesPerRequest.
func loadImages(msgs []Message) (map[int][]loadedImage, error) {
	n := 0
	for _, m := range msgs {
		n += len(m.Images)
	}
	if n == 0 {
		return nil, nil
	}
	if n > MaxImagesPerRequest {
		return nil, newErr(ErrImage, nil, "the request carries %d images (at most %d)", n, MaxImagesPerRequest)
	}
	out := make(map[int][]loadedImage, n)
	for i, m := range msgs {
		for _, img := range m.Images {
			l, err := img.load()
			if err != nil {
				return nil, err
			}
			out[i] = append(out[i], l)
		}
	}
	return out, nil
}

// sizeText is n bytes in KiB or MiB.
func sizeText(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

// TakesImages reports whether p's model takes images: p has a Vision()
// method (the OpenAI and Anthropic clients, from Config.Vision) that says
// so. Any other provider, the offline one included, does not.
func TakesImages(p Provider) bool {
	v, ok := p.(interface{ Vision() bool })
	return ok && v.Vision()
}

// CheckImage reports whether img can be sent (ErrImage otherwise: its
// file cannot be read, it is larger than MaxImageBase64Bytes as base64,
// or it is not one of ImageMIMETypes). It reads the file.
func CheckImage(img Image) error {
	_, err := img.load()
	return err
}

// FitImages returns msgs with at most MaxImagesPerRequest images: past
// that, the images of the oldest messages are left out and each such
// message's text says so (with the files' paths). msgs is not changed;
// the result is msgs itself when nothing had to go.
func FitImages(msgs []Message) []Message {
	n := 0
	for _, m := range msgs {
		n += len(m.Images)
	}
	if n <= MaxImagesPerRequest {
		return msgs
	}
	out := slices.Clone(msgs)
	keep := MaxImagesPerRequest
	for i := len(out) - 1; i >= 0; i-- {
		m := &out[i]
		if len(m.Images) <= keep {
			keep -= len(m.Images)
			continue
		}
		dropped := m.Images[:len(m.Images)-keep]
		var paths []string
		for _, img := range dropped {
			if img.Path != "" {
				paths = append(paths, img.Path)
			} else {
				paths = append(paths, "(in memory)")
			}
		}
		m.Images = slices.Clone(m.Images[len(m.Images)-keep:])
		if len(m.Images) == 0 {
			m.Images = nil
		}
		m.Content += fmt.Sprintf("\n[%d earlier images not attached again (at most %d per request): %s]",
			len(dropped), MaxImagesPerRequest, strings.Join(paths, ", "))
		keep = 0
	}
	return out
}
