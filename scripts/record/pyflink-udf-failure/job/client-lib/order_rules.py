"""Rounding rules of the order service: installed where the job is submitted, not on the TaskManagers."""


def round_price(value):
    return round(value, 2)
