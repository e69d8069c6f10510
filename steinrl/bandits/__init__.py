"""Contextual bandits: tasks (Mushroom, Wheel, Linear, SparseLinear, Classification) and Thompson-sampling agents."""
