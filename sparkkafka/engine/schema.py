"""Spark schemas for the Arrow schemas of the tables (one definition of each table's columns)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as St

_PRIMITIVES = {
    pa.int8(): St.ByteType(), pa.int32(): St.IntegerType(), pa.int64(): St.LongType(),
    pa.string(): St.StringType(), pa.binary(): St.BinaryType(), pa.bool_(): St.BooleanType(),
}


def spark_type(t: pa.DataType) -> St.DataType:
    if pa.types.is_list(t):
        return St.ArrayType(spark_type(t.value_type), True)
    return _PRIMITIVES[t]


def spark_schema(schema: pa.Schema) -> St.StructType:
    """The StructType users can pass to chispa: every column nullable, as Delta stores them."""
    return St.StructType([St.StructField(f.name, spark_type(f.type), True) for f in schema])
