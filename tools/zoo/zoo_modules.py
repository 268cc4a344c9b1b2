"""torch modules of the model zoo that torchvision does not provide: the
shapes of the performance issue's real models and the modules people build
by hand.  Used by zoo_models.py; nothing here downloads anything.

  SVTR        SVTR-style text recogniser: conv stem, a conv positional
              embedding, global-attention blocks, a height-merging conv,
              CTC logits over a 6625-symbol alphabet
  DBNet       DBNet-style text detector: a small ResNet backbone, an FPN
              with nearest Resize (interpolate scale 2) and Concat, a head
              of Conv + two ConvTranspose 2x2/2 and Sigmoid
  VadStep     a voice-activity step (Silero-like): Conv1d front end whose
              weights are DFT bases (torch 1.13 exports no stft), a
              scripted If on the sample rate, magnitude, conv encoder, an
              LSTMCell with (h, c) as inputs and outputs, a sigmoid score
  UNet        the classic encoder/decoder with ConvTranspose upsampling and
              skip Concats (base width 16, so 1024x1024 stays tractable)
  Encoder     nn.TransformerEncoder with a bool key-padding mask
  GPT         a GPT-style decoder (pre-LN, learned positions, causal mask,
              Gelu MLP) whose KV cache comes in and goes out as one tensor
  RNNStack    2-layer LSTM or GRU with its state in and out
  ScriptIf / ScriptLoop   control flow through torch.jit.script
  YoloHead    a YOLO-style detector: Conv+BN+SiLU, C3-ish blocks with
              Split/Concat, nearest Upsample, three-scale decoded head
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def conv_bn(cin, cout, k=3, s=1, act=nn.ReLU, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), act())


# ------------------------------------------------------------------ SVTR

class MixBlock(nn.Module):
    def __init__(self, dim, heads, mlp=2.0):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp)), nn.GELU(),
                                 nn.Linear(int(dim * mlp), dim))

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, c // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        att = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c)
        x = x + self.proj(y)
        return x + self.mlp(self.norm2(x))


class SVTR(nn.Module):
    def __init__(self, classes=6625, dims=(64, 128), depth=(2, 2), heads=(2, 4)):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 32, 3, 2, nn.GELU), conv_bn(32, dims[0], 3, 2, nn.GELU))
        self.pos = nn.Conv2d(dims[0], dims[0], 3, 1, 1, groups=dims[0])
        self.stage1 = nn.ModuleList(MixBlock(dims[0], heads[0]) for _ in range(depth[0]))
        self.merge = nn.Sequential(nn.Conv2d(dims[0], dims[1], 3, (2, 1), 1), nn.BatchNorm2d(dims[1]))
        self.stage2 = nn.ModuleList(MixBlock(dims[1], heads[1]) for _ in range(depth[1]))
        self.norm = nn.LayerNorm(dims[1])
        self.head = nn.Linear(dims[1], classes)

    def _blocks(self, x, blocks):
        b, c, h, w = x.shape
        t = x.flatten(2).transpose(1, 2)
        for blk in blocks:
            t = blk(t)
        return t.transpose(1, 2).reshape(b, c, h, w)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.pos(x)
        x = self._blocks(x, self.stage1)
        x = self._blocks(self.merge(x), self.stage2)
        x = x.mean(2).transpose(1, 2)           # [B, W/4, C]: one column per step
        return self.head(self.norm(x)).softmax(-1)


# ------------------------------------------------------------------ DBNet

class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = conv_bn(cin, cout, 3, stride)
        self.b = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.b(self.a(x)) + self.skip(x))


class DBNet(nn.Module):
    def __init__(self, widths=(16, 32, 64, 128), inner=64):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, widths[0], 3, 2), nn.MaxPool2d(3, 2, 1))
        cins = (widths[0],) + widths[:-1]
        self.stages = nn.ModuleList(
            nn.Sequential(BasicBlock(ci, co, 1 if i == 0 else 2), BasicBlock(co, co, 1))
            for i, (ci, co) in enumerate(zip(cins, widths)))
        self.lat = nn.ModuleList(nn.Conv2d(w, inner, 1, bias=False) for w in widths)
        self.smooth = nn.ModuleList(nn.Conv2d(inner, inner // 4, 3, 1, 1, bias=False)
                                    for _ in widths)
        self.head = nn.Sequential(
            conv_bn(inner, inner // 4, 3, 1),
            nn.ConvTranspose2d(inner // 4, inner // 4, 2, 2), nn.BatchNorm2d(inner // 4), nn.ReLU(),
            nn.ConvTranspose2d(inner // 4, 1, 2, 2), nn.Sigmoid())

    def forward(self, x):
        feats = []
        x = self.stem(x)
        for s in self.stages:
            x = s(x)
            feats.append(x)
        lat = [l(f) for l, f in zip(self.lat, feats)]
        for i in range(len(lat) - 1, 0, -1):   # top-down: nearest x2 and add
            lat[i - 1] = lat[i - 1] + F.interpolate(lat[i], scale_factor=2.0, mode="nearest")
        outs = [s(l) for s, l in zip(self.smooth, lat)]
        outs = [F.interpolate(o, scale_factor=2.0 ** i, mode="nearest") if i else o
                for i, o in enumerate(outs)]
        return self.head(torch.cat(outs[::-1], 1))


# ------------------------------------------------------------------ VAD

def dft_bases(n_fft, bins):
    """[2*bins, 1, n_fft] Hann-windowed cos and -sin rows: a Conv1d that
    computes the first `bins` DFT coefficients of each frame."""
    n = torch.arange(n_fft, dtype=torch.float64)
    k = torch.arange(bins, dtype=torch.float64)[:, None]
    win = 0.5 - 0.5 * torch.cos(2 * math.pi * n / n_fft)
    ang = 2 * math.pi * k * n / n_fft
    w = torch.cat([torch.cos(ang) * win, -torch.sin(ang) * win])
    return w[:, None, :].float()


class Frontend(nn.Module):
    """Scripted so that the sample-rate test exports as an If: 16 kHz
    frames of 256 samples hop 128, 8 kHz frames of 128 hop 64, both giving
    the same 65 low bins (0-4 kHz)."""

    def __init__(self, bins=65):
        super().__init__()
        self.conv16 = nn.Conv1d(1, 2 * bins, 256, 128, bias=False)
        self.conv8 = nn.Conv1d(1, 2 * bins, 128, 64, bias=False)
        with torch.no_grad():
            self.conv16.weight.copy_(dft_bases(256, bins))
            self.conv8.weight.copy_(dft_bases(128, bins))
        self.bins = bins

    def forward(self, x: torch.Tensor, sr: torch.Tensor) -> torch.Tensor:
        if bool(sr == 16000):
            y = self.conv16(x)
        else:
            y = self.conv8(x)
        return y


class VadStep(nn.Module):
    def __init__(self, bins=65, hidden=64):
        super().__init__()
        self.front = Frontend(bins)
        self.bins = bins
        self.enc = nn.Sequential(nn.Conv1d(bins, hidden, 3, 1, 1), nn.ReLU(),
                                 nn.Conv1d(hidden, hidden, 3, 2, 1), nn.ReLU())
        self.cell = nn.LSTMCell(hidden, hidden)
        self.out = nn.Conv1d(hidden, 1, 1)

    def forward(self, audio: torch.Tensor, sr: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        spec = self.front(audio.unsqueeze(1), sr)          # [B, 2*bins, frames]
        re, im = spec[:, :self.bins], spec[:, self.bins:]
        mag = torch.log(torch.sqrt(re * re + im * im) + 1e-4)
        z = self.enc(mag).mean(2)                          # [B, hidden]
        h1, c1 = self.cell(z, (h, c))
        prob = torch.sigmoid(self.out(F.relu(h1).unsqueeze(2))).squeeze(2)
        return prob, h1, c1


# ------------------------------------------------------------------ U-Net

class UNet(nn.Module):
    def __init__(self, base=16, depth=4, classes=2):
        super().__init__()
        w = [base * 2 ** i for i in range(depth + 1)]
        self.down = nn.ModuleList()
        cin = 3
        for c in w:
            self.down.append(nn.Sequential(conv_bn(cin, c), conv_bn(c, c)))
            cin = c
        self.up = nn.ModuleList(nn.ConvTranspose2d(w[i + 1], w[i], 2, 2) for i in range(depth))
        self.dec = nn.ModuleList(nn.Sequential(conv_bn(2 * w[i], w[i]), conv_bn(w[i], w[i]))
                                 for i in range(depth))
        self.out = nn.Conv2d(w[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        for i in range(len(self.up) - 1, -1, -1):
            x = self.dec[i](torch.cat([skips[i], self.up[i](x)], 1))
        return self.out(x)


# ------------------------------------------------------------------ transformers

class Encoder(nn.Module):
    def __init__(self, d=256, heads=4, ff=512, layers=2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)

    def forward(self, x, pad_mask):
        return self.enc(x, src_key_padding_mask=pad_mask)


class GPTBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, past, mask):
        b, s, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, s, self.heads, hd).transpose(1, 2)
        k = torch.cat([past[0], k.view(b, s, self.heads, hd).transpose(1, 2)], 2)
        v = torch.cat([past[1], v.view(b, s, self.heads, hd).transpose(1, 2)], 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd) + mask
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x)), torch.stack([k, v])


class GPT(nn.Module):
    """input_ids [B, S] int64 and past [L, 2, B, H, P, D/H] -> logits
    [B, S, V] and present [L, 2, B, H, P+S, D/H]."""

    def __init__(self, vocab=2048, d=128, heads=4, layers=2, ctx=512):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(GPTBlock(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, past):
        s = input_ids.shape[1]
        p = past.shape[4]
        pos = torch.arange(p, p + s, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)[None]
        # Causal mask over the cache and the new tokens: query i sees keys <= p + i.
        keys = torch.arange(p + s)[None, :]
        allowed = keys <= (pos[:, None])
        mask = torch.zeros(s, p + s).masked_fill(~allowed, -1e4)
        present = []
        for i, blk in enumerate(self.blocks):
            x, kv = blk(x, past[i], mask)
            present.append(kv)
        return self.head(self.ln(x)), torch.stack(present)


class RNNStack(nn.Module):
    def __init__(self, kind, dim=80, hidden=128, layers=2):
        super().__init__()
        self.kind = kind
        cls = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = cls(dim, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, 32)

    def forward(self, x, h, c=None):
        if self.kind == "lstm":
            y, (h1, c1) = self.rnn(x, (h, c))
            return self.out(y), h1, c1
        y, h1 = self.rnn(x, h)
        return self.out(y), h1


# ------------------------------------------------------------------ control flow

class ScriptIf(nn.Module):
    """Branches on the data: a gated residual conv block or a pooled path."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(8, 8, 3, 1, 1)
        self.b = nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        if bool(gate.sum() > 0):
            y = x + torch.relu(self.a(x))
        else:
            y = torch.tanh(self.b(x)) * 2.0
        return y


class ScriptLoop(nn.Module):
    """A recurrence run for as many steps as the sequence has (a Loop with
    a carried state and a scan-like output)."""

    def __init__(self, dim: int = 32):
        super().__init__()
        self.w = nn.Linear(dim, dim)
        self.u = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, h: torch.Tensor):
        outs = []
        for t in range(x.size(1)):
            h = torch.tanh(self.w(x[:, t]) + self.u(h))
            outs.append(h)
        return torch.stack(outs, 1), h


# ------------------------------------------------------------------ YOLO

class C3(nn.Module):
    def __init__(self, c, n=1):
        super().__init__()
        self.cv1 = conv_bn(c, c, 1, act=nn.SiLU)
        self.m = nn.Sequential(*(nn.Sequential(conv_bn(c // 2, c // 2, 1, act=nn.SiLU),
                                               conv_bn(c // 2, c // 2, 3, act=nn.SiLU))
                                 for _ in range(n)))
        self.cv2 = conv_bn(c, c, 1, act=nn.SiLU)

    def forward(self, x):
        a, b = self.cv1(x).split(x.shape[1] // 2, 1)
        return self.cv2(torch.cat([a, self.m(b) + b], 1))


class YoloHead(nn.Module):
    def __init__(self, classes=80, anchors=3, w=(16, 32, 64, 128)):
        super().__init__()
        self.no = classes + 5
        self.na = anchors
        self.stem = conv_bn(3, w[0], 3, 2, nn.SiLU)
        self.s1 = nn.Sequential(conv_bn(w[0], w[1], 3, 2, nn.SiLU), C3(w[1]))
        self.s2 = nn.Sequential(conv_bn(w[1], w[2], 3, 2, nn.SiLU), C3(w[2]))    # /8
        self.s3 = nn.Sequential(conv_bn(w[2], w[3], 3, 2, nn.SiLU), C3(w[3]))    # /16
        self.s4 = nn.Sequential(conv_bn(w[3], w[3], 3, 2, nn.SiLU), C3(w[3]))    # /32
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n3 = conv_bn(2 * w[3], w[3], 1, act=nn.SiLU)
        self.n2 = conv_bn(w[3] + w[2], w[2], 1, act=nn.SiLU)
        self.heads = nn.ModuleList(nn.Conv2d(c, self.no * anchors, 1) for c in (w[2], w[3], w[3]))
        self.register_buffer("anchor_wh", torch.tensor(
            [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119],
             [116, 90, 156, 198, 373, 326]], dtype=torch.float32).view(3, 1, anchors, 1, 1, 2))

    def forward(self, x):
        p3 = self.s2(self.s1(self.stem(x)))
        p4 = self.s3(p3)
        p5 = self.s4(p4)
        f4 = self.n3(torch.cat([self.up(p5), p4], 1))
        f3 = self.n2(torch.cat([self.up(f4), p3], 1))
        outs = []
        for i, (f, stride) in enumerate(zip((f3, f4, p5), (8, 16, 32))):
            b, _, h, w = f.shape
            y = self.heads[i](f).view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
            gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
            grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2).float()
            xy = (y[..., :2] * 2 - 0.5 + grid) * stride
            wh = (y[..., 2:4] * 2) ** 2 * self.anchor_wh[i]
            outs.append(torch.cat([xy, wh, y[..., 4:]], -1).view(b, -1, self.no))
        return torch.cat(outs, 1)
