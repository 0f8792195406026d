"""Reference models built from plain torch modules (no timm, torchvision or transformers): a Vision
Transformer, ResNets, a video ResNet (r3d) and Whisper's audio encoder.

Every linear layer is an nn.Linear and every convolution an nn.Conv1d / 2d / 3d, so
`tileops.convert(model)` swaps them all; attention is F.scaled_dot_product_attention, norms are torch's. Sizes are
arguments, so tests build tiny variants of the same code that runs at full size:

    import tileops
    from tileops import models
    m = tileops.convert(models.vit_s16())                    # ViT-S/16: 384 wide, 6 heads, 12 blocks, 224^2
    m = tileops.convert(models.resnet50())                   # ResNet-50 (torchvision's v1.5 layout)
    m = models.vit(img_size=32, patch=8, dim=32, depth=2, heads=2, num_classes=10)
    m = models.resnet(layers=(1, 1), width=8, num_classes=10, small_input=True)
    m = models.cnn(num_classes=10, in_chans=1, width=16)     # a plain small CNN
    m = tileops.convert(models.r3d_18())                     # torchvision's r3d_18 layout, clips (N, 3, T, H, W)
    m = tileops.convert(models.whisper_encoder())            # Whisper tiny's encoder + a pooled class head
"""
import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------------------------------
# Vision Transformer (pre-norm, class token, learned position embedding, as ViT / timm)


class PatchEmbed(nn.Module):
    """Non-overlapping patches by one strided nn.Conv2d, flattened to tokens (B, N, dim)."""

    def __init__(self, img_size, patch, in_chans, dim):
        super().__init__()
        if img_size % patch:
            raise ValueError("tileops.models.vit: img_size %d is not a multiple of patch %d" % (img_size, patch))
        self.num_patches = (img_size // patch) ** 2
        self.proj = nn.Conv2d(in_chans, dim, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        if dim % heads:
            raise ValueError("tileops.models.vit: dim %d is not a multiple of heads %d" % (dim, heads))
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape[0], x.shape[1], x.shape[2]  # indexed, not unpacked: torch.fx can trace it
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(b, n, d))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_ratio=4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self, img_size=224, patch=16, dim=384, depth=12, heads=6, num_classes=1000, in_chans=3,
                 mlp_ratio=4.0):
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch, in_chans, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def vit(img_size=224, patch=16, dim=384, depth=12, heads=6, num_classes=1000, in_chans=3, mlp_ratio=4.0):
    """A ViT of any size; the defaults are ViT-S/16."""
    return VisionTransformer(img_size, patch, dim, depth, heads, num_classes, in_chans, mlp_ratio)


def vit_s16(num_classes=1000, img_size=224):
    return vit(img_size=img_size, patch=16, dim=384, depth=12, heads=6, num_classes=num_classes)


# ---------------------------------------------------------------------------------------
# ResNet (torchvision's layout: stride on the 3x3 conv of a bottleneck, "v1.5")


def _conv_bn(cin, cout, k, stride=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, width, stride=1):
        super().__init__()
        cout = width * self.expansion
        self.conv1, self.conv2 = _conv_bn(cin, width, 3, stride), _conv_bn(width, cout, 3)
        self.downsample = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        return F.relu(self.conv2(F.relu(self.conv1(x))) + self.downsample(x))


class Bottleneck(nn.Module):
    """1x1, 3x3 (grouped for ResNeXt: `groups` groups of `width_per_group` channels per 64 of width), 1x1."""

    expansion = 4

    def __init__(self, cin, width, stride=1, groups=1, width_per_group=64):
        super().__init__()
        cout, inner = width * self.expansion, width * width_per_group // 64 * groups
        self.conv1, self.conv2 = _conv_bn(cin, inner, 1), _conv_bn(inner, inner, 3, stride, groups)
        self.conv3 = _conv_bn(inner, cout, 1)
        self.downsample = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        y = F.relu(self.conv2(F.relu(self.conv1(x))))
        return F.relu(self.conv3(y) + self.downsample(x))


class _Backbone(nn.Module):
    """What the CNNs share: stem -> stages -> global average pool -> fc, their convs He-initialised.
    A subclass sets self.stem, then calls _head with its stages."""

    def _pool(self, x):  # a method, not staticmethod(F...): torch 2.7's export traces that as a user function
        return F.adaptive_avg_pool2d(x, 1)

    def _head(self, stages, cin, num_classes):
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Conv3d)):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(self._pool(x), 1))


class ResNet(_Backbone):
    def __init__(self, block, layers: Sequence[int], width=64, num_classes=1000, in_chans=3, small_input=False,
                 **block_kw):
        super().__init__()
        if small_input:  # 3x3 stem, no max-pool: for 8x8 .. 32x32 images
            self.stem = nn.Sequential(_conv_bn(in_chans, width, 3), nn.ReLU())
        else:
            self.stem = nn.Sequential(_conv_bn(in_chans, width, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        stages, cin = [], width
        for i, n in enumerate(layers):
            w = width * 2 ** i
            blocks = []
            for j in range(n):
                blocks.append(block(cin, w, 2 if (i > 0 and j == 0) else 1, **block_kw))
                cin = w * block.expansion
            stages.append(nn.Sequential(*blocks))
        self._head(stages, cin, num_classes)


def resnet(layers=(3, 4, 6, 3), width=64, num_classes=1000, in_chans=3, small_input=False, bottleneck=True,
           groups=1, width_per_group=64):
    """A ResNet of any depth and width; the defaults are ResNet-50. groups / width_per_group (bottleneck
    only): ResNeXt's grouped 3x3 convs."""
    kw = dict(groups=groups, width_per_group=width_per_group) if bottleneck else {}
    return ResNet(Bottleneck if bottleneck else BasicBlock, layers, width, num_classes, in_chans, small_input, **kw)


def resnet50(num_classes=1000):
    return resnet((3, 4, 6, 3), 64, num_classes)


def resnext50_32x4d(num_classes=1000):
    return resnet((3, 4, 6, 3), 64, num_classes, groups=32, width_per_group=4)


# ---------------------------------------------------------------------------------------
# RegNet-Y (torchvision's layout: bottleneck blocks of grouped 3x3 convs of a fixed group width,
# squeeze-and-excitation sized from the block's input width, ReLU after the residual add)


class SqueezeExcite(nn.Module):
    def __init__(self, channels, squeeze):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(channels, squeeze, 1), nn.Conv2d(squeeze, channels, 1)

    def forward(self, x):
        return x * torch.sigmoid(self.fc2(F.relu(self.fc1(F.adaptive_avg_pool2d(x, 1)))))


class RegNetBlock(nn.Module):
    def __init__(self, cin, cout, stride, group_width, se_ratio=0.25):
        super().__init__()
        self.a = nn.Sequential(_conv_bn(cin, cout, 1), nn.ReLU())
        self.b = nn.Sequential(_conv_bn(cout, cout, 3, stride, cout // group_width), nn.ReLU())
        self.se = SqueezeExcite(cout, int(round(se_ratio * cin)))
        self.c = _conv_bn(cout, cout, 1)
        self.proj = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        return F.relu(self.proj(x) + self.c(self.se(self.b(self.a(x)))))


class RegNet(_Backbone):
    def __init__(self, depths: Sequence[int], widths: Sequence[int], group_width, stem=32, num_classes=1000,
                 in_chans=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_chans, stem, 3, 2, 1, bias=False), nn.BatchNorm2d(stem), nn.ReLU())
        stages, cin = [], stem
        for d, w in zip(depths, widths):
            stages.append(nn.Sequential(*[RegNetBlock(cin if j == 0 else w, w, 2 if j == 0 else 1, group_width)
                                          for j in range(d)]))
            cin = w
        self._head(stages, cin, num_classes)


def regnet(depths=(1, 3, 6, 6), widths=(48, 104, 208, 440), group_width=8, stem=32, num_classes=1000):
    """A RegNet-Y of any stage depths and widths (each a multiple of group_width); the defaults are
    RegNetY-400MF's."""
    return RegNet(depths, widths, group_width, stem, num_classes)


def regnet_y_400mf(num_classes=1000):
    return regnet(num_classes=num_classes)


def cnn(num_classes=10, in_chans=1, width=16):
    """A small plain CNN (conv-BN-ReLU x4, two stride-2 steps, global pool, linear)."""

    def cbr(cin, cout, stride=1):
        return [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.Sequential(
        *cbr(in_chans, width), *cbr(width, width), *cbr(width, 2 * width, 2), *cbr(2 * width, 2 * width),
        *cbr(2 * width, 4 * width, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(4 * width, num_classes),
    )


# ---------------------------------------------------------------------------------------
# Video ResNet (torchvision's r3d_18 layout: a (3, 7, 7) stem strided in space only, 3x3x3 basic
# blocks, 1x1x1 strided downsampling)


def _conv3d_bn(cin, cout, k, stride=1, padding=0):
    return nn.Sequential(nn.Conv3d(cin, cout, k, stride=stride, padding=padding, bias=False), nn.BatchNorm3d(cout))


class BasicBlock3d(nn.Module):
    def __init__(self, cin, width, stride=1):
        super().__init__()
        self.conv1, self.conv2 = _conv3d_bn(cin, width, 3, stride, 1), _conv3d_bn(width, width, 3, 1, 1)
        self.downsample = _conv3d_bn(cin, width, 1, stride) if stride != 1 or cin != width else nn.Identity()

    def forward(self, x):
        return F.relu(self.conv2(F.relu(self.conv1(x))) + self.downsample(x))


class VideoResNet(_Backbone):
    def _pool(self, x):
        return F.adaptive_avg_pool3d(x, 1)

    def __init__(self, layers: Sequence[int] = (2, 2, 2, 2), width=64, num_classes=400, in_chans=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv3d(in_chans, width, (3, 7, 7), (1, 2, 2), (1, 3, 3), bias=False),
                                  nn.BatchNorm3d(width), nn.ReLU())
        stages, cin = [], width
        for i, n in enumerate(layers):
            w = width * 2 ** i
            stages.append(nn.Sequential(*[BasicBlock3d(cin if j == 0 else w, w, 2 if (i > 0 and j == 0) else 1)
                                          for j in range(n)]))
            cin = w
        self._head(stages, cin, num_classes)


def r3d(layers=(2, 2, 2, 2), width=64, num_classes=400, in_chans=3):
    """A video ResNet of any depth and width over clips (N, C, T, H, W); the defaults are r3d_18."""
    return VideoResNet(layers, width, num_classes, in_chans)


def r3d_18(num_classes=400):
    return r3d((2, 2, 2, 2), 64, num_classes)


# ---------------------------------------------------------------------------------------
# Whisper's audio encoder (two GELU conv1d, the second strided; sinusoidal positions; pre-norm
# blocks; a final LayerNorm), with a mean-pooled linear head so that it trains on labels


def sinusoids(length, channels, max_timescale=10000):
    """Whisper's fixed positional embedding (length, channels): sines, then cosines."""
    inc = math.log(max_timescale) / (channels // 2 - 1)
    scaled = torch.arange(length)[:, None] * torch.exp(-inc * torch.arange(channels // 2))[None, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=1)


class AudioEncoder(nn.Module):
    def __init__(self, n_mels=80, n_ctx=1500, dim=384, depth=4, heads=6, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, dim, 3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, 3, stride=2, padding=1)
        self.register_buffer("positional_embedding", sinusoids(n_ctx, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(depth)])
        self.ln_post = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):  # x: (N, n_mels, 2 * n_ctx) log-mel frames
        x = F.gelu(self.conv2(F.gelu(self.conv1(x)))).transpose(1, 2)
        x = self.ln_post(self.blocks(x + self.positional_embedding.narrow(0, 0, x.shape[1])))  # narrow: fx traces it
        return self.head(x.mean(1))


def whisper_encoder(n_mels=80, n_ctx=1500, dim=384, depth=4, heads=6, num_classes=1000):
    """Whisper's encoder of any size over (N, n_mels, 2 * n_ctx) inputs; the defaults are whisper-tiny's."""
    return AudioEncoder(n_mels, n_ctx, dim, depth, heads, num_classes)


# ---------------------------------------------------------------------------------------
# A Llama-style decoder (RMSNorm, rotary positions, grouped-query causal attention by SDPA, SwiGLU
# MLP, no biases), returning next-token logits (N, T, vocab)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * self.weight


def _rotate(x, cos, sin):
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-b, a], dim=-1) * sin


class LlamaAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        if dim % heads or heads % kv_heads:
            raise ValueError("tileops.models.llama: dim %d, heads %d, kv_heads %d do not divide" % (dim, heads, kv_heads))
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.q_proj = nn.Linear(dim, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, dim, bias=False)

    def forward(self, x, cos, sin):
        b, t = x.shape[0], x.shape[1]
        q = self.q_proj(x).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        rep = self.heads // self.kv_heads  # grouped-query: each key/value head serves `rep` query heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, self.heads * self.hd))


class LlamaBlock(nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden):
        super().__init__()
        self.input_norm, self.post_norm = RMSNorm(dim), RMSNorm(dim)
        self.attn = LlamaAttention(dim, heads, kv_heads)
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.input_norm(x), cos, sin)
        h = self.post_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, vocab=32000, dim=1024, depth=8, heads=16, kv_heads=4, hidden=2816, max_len=2048):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([LlamaBlock(dim, heads, kv_heads, hidden) for _ in range(depth)])
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        hd = dim // heads
        inv = 1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd)
        ang = torch.outer(torch.arange(max_len).float(), inv)
        self.register_buffer("cos", torch.cat([ang, ang], -1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat([ang, ang], -1).sin(), persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens):  # (N, T) token ids -> (N, T, vocab) logits
        x = self.embed(tokens)
        t = tokens.shape[1]
        cos, sin = self.cos.narrow(0, 0, t).to(x.dtype), self.sin.narrow(0, 0, t).to(x.dtype)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.lm_head(self.norm(x))


def llama(vocab=32000, dim=1024, depth=8, heads=16, kv_heads=4, hidden=2816, max_len=2048):
    """A Llama-style decoder of any size; the defaults are issue 61's 8 layers of width 1024, SwiGLU 2816."""
    return Llama(vocab, dim, depth, heads, kv_heads, hidden, max_len)


__all__ = ["VisionTransformer", "ResNet", "RegNet", "VideoResNet", "AudioEncoder", "Llama", "vit", "vit_s16",
           "resnet", "resnet50", "resnext50_32x4d", "regnet", "regnet_y_400mf", "cnn", "r3d", "r3d_18",
           "whisper_encoder", "llama"]
