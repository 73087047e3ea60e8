//! exec and attach over SPDY/3.1 (kubectl 1.27–1.29, and the fallback of later ones).
