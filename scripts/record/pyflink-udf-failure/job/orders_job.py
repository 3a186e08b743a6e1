"""Unit prices of order lines through a Python scalar function (Table API), written to a print sink.

    orders_job.py [--lines good|zero-quantity|slow] [--rules shipped|on-client-only]

--lines zero-quantity adds an order line with quantity 0: unit_price divides by it and raises ZeroDivisionError in
the Python worker; --lines slow prices 600 lines at a tenth of a second each. --rules on-client-only takes the rounding
rule from order_rules, on the client's PYTHONPATH but not shipped to the workers (no python.files).
"""
import argparse

from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
from pyflink.table.udf import udf

parser = argparse.ArgumentParser()
parser.add_argument("--lines", default="good")
parser.add_argument("--rules", default="inline")
args, _ = parser.parse_known_args()

if args.rules == "on-client-only":
    from order_rules import round_price
else:
    def round_price(value):
        return round(value, 2)


@udf(result_type=DataTypes.DOUBLE())
def unit_price(amount, quantity):
    return round_price(amount / quantity)


@udf(result_type=DataTypes.DOUBLE())
def slow_unit_price(amount, quantity):
    import time
    time.sleep(0.1)  # the Python worker is busy for a minute
    return round_price(amount / quantity)


def main():
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    rows = [("o-1001", 59.97, 3), ("o-1002", 12.50, 1), ("o-1003", 100.00, 4)]
    if args.lines == "zero-quantity":
        rows.append(("o-1004", 19.99, 0))
    elif args.lines == "slow":
        rows = [(f"o-{2000 + i}", 10.0 + i, 1 + i % 5) for i in range(600)]
    lines = t_env.from_elements(rows, DataTypes.ROW([DataTypes.FIELD("order_id", DataTypes.STRING()),
                                                      DataTypes.FIELD("amount", DataTypes.DOUBLE()),
                                                      DataTypes.FIELD("quantity", DataTypes.INT())]))
    t_env.execute_sql("CREATE TABLE unit_prices (order_id STRING, unit_price DOUBLE) WITH ('connector' = 'print')")
    price = slow_unit_price if args.lines == "slow" else unit_price
    lines.select(lines.order_id, price(lines.amount, lines.quantity)).execute_insert("unit_prices")


if __name__ == "__main__":
    main()
