package nettest

import "net/http"

// EchoBody is a tunnel server's handler body: it answers 200 and copies the request body
// into the response, flushing after each read so the bytes cross at once, until the body
// ends (the client's end of stream) or fails.
func EchoBody(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	buf := make([]byte, 1024)
	for {
		n, err := r.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			w.(http.Flusher).Flush()
		}
		if err != nil {
			return
		}
	}
}
