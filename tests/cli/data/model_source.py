import torch, torch.nn as nn


class Net(nn.Module):
    pass
