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


def _conv_bn(cin, cout, k, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout))


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
    expansion = 4

    def __init__(self, cin, width, stride=1):
        super().__init__()
        cout = width * self.expansion
        self.conv1, self.conv2 = _conv_bn(cin, width, 1), _conv_bn(width, width, 3, stride)
        self.conv3 = _conv_bn(width, cout, 1)
        self.downsample = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        y = F.relu(self.conv2(F.relu(self.conv1(x))))
        return F.relu(self.conv3(y) + self.downsample(x))


class ResNet(nn.Module):
    def __init__(self, block, layers: Sequence[int], width=64, num_classes=1000, in_chans=3, small_input=False):
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
                blocks.append(block(cin, w, 2 if (i > 0 and j == 0) else 1))
                cin = w * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def resnet(layers=(3, 4, 6, 3), width=64, num_classes=1000, in_chans=3, small_input=False, bottleneck=True):
    """A ResNet of any depth and width; the defaults are ResNet-50."""
    return ResNet(Bottleneck if bottleneck else BasicBlock, layers, width, num_classes, in_chans, small_input)


def resnet50(num_classes=1000):
    return resnet((3, 4, 6, 3), 64, num_classes)


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


class VideoResNet(nn.Module):
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
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv3d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool3d(x, 1), 1))


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
        x = self.ln_post(self.blocks(x + self.positional_embedding[: x.shape[1]]))
        return self.head(x.mean(1))


def whisper_encoder(n_mels=80, n_ctx=1500, dim=384, depth=4, heads=6, num_classes=1000):
    """Whisper's encoder of any size over (N, n_mels, 2 * n_ctx) inputs; the defaults are whisper-tiny's."""
    return AudioEncoder(n_mels, n_ctx, dim, depth, heads, num_classes)


__all__ = ["VisionTransformer", "ResNet", "VideoResNet", "AudioEncoder", "vit", "vit_s16", "resnet", "resnet50",
           "cnn", "r3d", "r3d_18", "whisper_encoder"]
