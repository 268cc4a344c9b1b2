"""Inputs that look like real data, for the model zoo (tools/zoo/gen.py).

Random uniform noise is a poor test input: convolutions average it away,
BatchNorm statistics calibrated on it saturate on anything else, and
detectors find nothing in it.  These generators give tensors with the
structure of their modality, from a numpy Generator so every file is
reproducible:

  image()     smooth gradients, low-frequency waves, a few filled shapes and
              fine noise; [0, 1] or ImageNet-normalised (mean 0, std ~1)
  video()     one image() scene panned by a pixel per frame
  speech()    voiced syllables (a gliding pitch with harmonics and formant-
              like weighting, syllable envelopes) plus breath noise, at
              about -12 dBFS
  features()  log-power spectrogram frames of speech(), mean/var
              normalised, as an RNN front end gets them
  tokens()    int64 ids in [0, vocab) with a Zipf-like frequency profile
"""
import numpy as np

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def _scene(rng, h, w, channels=3):
    """An [channels, h, w] picture in [0, 1]."""
    y = np.linspace(0.0, 1.0, h, dtype=np.float64)[:, None]
    x = np.linspace(0.0, 1.0, w, dtype=np.float64)[None, :]
    img = np.empty((channels, h, w), np.float64)
    base = rng.uniform(0.2, 0.8, channels)
    gy, gx = rng.uniform(-0.3, 0.3, (2, channels))
    for c in range(channels):
        img[c] = base[c] + gy[c] * (y - 0.5) + gx[c] * (x - 0.5)
    for _ in range(4):  # low-frequency waves, shared across channels with a tint
        fy, fx = rng.uniform(0.5, 4.0, 2)
        ph = rng.uniform(0, 2 * np.pi)
        amp = rng.uniform(0.03, 0.12)
        wave = amp * np.sin(2 * np.pi * (fy * y + fx * x) + ph)
        img += wave[None] * rng.uniform(0.5, 1.0, channels)[:, None, None]
    for _ in range(int(rng.integers(4, 9))):  # objects: rectangles and disks
        color = rng.uniform(0.0, 1.0, channels)
        cy, cx = rng.uniform(0.1, 0.9, 2)
        ry, rx = rng.uniform(0.05, 0.25, 2)
        if rng.random() < 0.5:
            mask = (np.abs(y - cy) < ry) & (np.abs(x - cx) < rx)
        else:
            mask = ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 < 1.0
        shade = 1.0 + 0.2 * (y - cy) / max(ry, 1e-3)
        for c in range(channels):
            img[c] = np.where(mask, np.clip(color[c] * shade, 0, 1), img[c])
    img += rng.normal(0.0, 0.02, img.shape)  # sensor noise
    return np.clip(img, 0.0, 1.0)


def image(rng, shape, normalize=True):
    """[N, C, H, W] (or [C, H, W]) image-like float32; normalised with the
    ImageNet mean/std when normalize and C == 3, else in [0, 1]."""
    lead = shape[:-3]
    c, h, w = shape[-3:]
    n = int(np.prod(lead)) if lead else 1
    out = np.stack([_scene(rng, h, w, c) for _ in range(n)]).astype(np.float32)
    if normalize and c == 3:
        out = (out - MEAN[None, :, None, None]) / STD[None, :, None, None]
    return out.reshape(tuple(shape)).astype(np.float32)


def video(rng, shape):
    """[N, C, T, H, W]: one scene per clip, panned a pixel per frame."""
    n, c, t, h, w = shape
    out = np.empty(shape, np.float32)
    for i in range(n):
        big = _scene(rng, h + t, w + t, c)
        for f in range(t):
            out[i, :, f] = big[:, f:f + h, f:f + w]
    mean = np.array([0.43216, 0.394666, 0.37645], np.float32)[:, None, None, None]
    std = np.array([0.22803, 0.22145, 0.216989], np.float32)[:, None, None, None]
    return ((out - mean) / std).astype(np.float32)


def speech(rng, n, sr=16000):
    """n samples of speech-like float32 audio in about [-0.5, 0.5]."""
    t = np.arange(n) / sr
    sig = np.zeros(n)
    pos = 0
    while pos < n:  # syllables of 80-250 ms separated by short pauses
        length = int(sr * rng.uniform(0.08, 0.25))
        gap = int(sr * rng.uniform(0.01, 0.06))
        seg = slice(pos, min(n, pos + length))
        tt = t[seg] - t[pos]
        f0 = rng.uniform(100, 220) * (1 + 0.15 * tt / max(tt[-1], 1e-3) * rng.choice([-1, 1]))
        phase = 2 * np.pi * np.cumsum(f0) / sr
        env = np.sin(np.pi * np.linspace(0, 1, tt.size)) ** 2
        formants = rng.uniform([300, 900, 2200], [800, 1800, 3000])
        voiced = np.zeros(tt.size)
        for k in range(1, 16):
            fk = k * f0
            gain = sum(np.exp(-((fk - fm) / 150.0) ** 2) for fm in formants) + 0.05 / k
            voiced += gain * np.sin(k * phase)
        sig[seg] = env * voiced
        pos += length + gap
    sig = sig / (np.abs(sig).max() + 1e-9) * 0.4
    sig += rng.normal(0, 0.005, n)  # breath / room noise
    return sig.astype(np.float32)


def features(rng, frames, dim, batch=1):
    """[batch, frames, dim] normalised log-power spectra of speech()."""
    hop, win = 160, 400
    out = np.empty((batch, frames, dim), np.float32)
    total = max(frames, 100)   # normalise over an utterance, not one frame
    for b in range(batch):
        audio = speech(rng, hop * total + win)
        idx = np.arange(win)[None, :] + hop * np.arange(total)[:, None]
        spec = np.abs(np.fft.rfft(audio[idx] * np.hanning(win), axis=1)) ** 2
        # Pool the 201 bins into dim bands of growing width (mel-like),
        # at least one bin each.
        edges = np.round(np.geomspace(1, spec.shape[1], dim + 1)).astype(int) - 1
        for i in range(1, dim + 1):
            edges[i] = max(edges[i], edges[i - 1] + 1)
        bands = np.stack([spec[:, edges[i]:edges[i + 1]].mean(1) for i in range(dim)], axis=1)
        logp = np.log(bands + 1e-8)
        norm = (logp - logp.mean(0)) / (logp.std(0) + 1e-5)
        start = int(rng.integers(0, total - frames + 1))
        out[b] = norm[start:start + frames]
    return out


def tokens(rng, shape, vocab):
    """int64 ids in [0, vocab), frequent ids small as in a BPE vocabulary."""
    ids = np.floor(vocab * rng.random(shape) ** 3).astype(np.int64)
    return np.clip(ids, 0, vocab - 1)
