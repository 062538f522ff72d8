package upsertmat.json;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.json.CreateJacksonParser;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.catalyst.util.FailureSafeParser;
import org.apache.spark.sql.catalyst.util.PermissiveMode$;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.collection.Iterator;
import scala.collection.immutable.Map;

/**
 * {@code from_json(line, schema, {mode: PERMISSIVE, columnNameOfCorruptRecord})} over a line's
 * bytes: the same row for every line, about twice as fast.
 *
 * <p>Spark's {@code from_json} reads each line through an {@code InputStreamReader} (a charset
 * decoder and its buffers per line, then Jackson's character parser); most of its time goes
 * there. This class first tries a <em>plain line</em> with Jackson's byte parser, built by the
 * same factory ({@code JSONOptions.buildJsonFactory}: the same features and limits): a line is
 * plain when it is one JSON object whose schema fields each hold {@code null} or a token that
 * Spark's own converter ({@code JacksonParser.makeConverter}) reads with one Jackson call — an
 * integer for {@code bigint}/{@code int}/{@code smallint}/{@code tinyint} ({@code getLongValue},
 * {@code getIntValue}, {@code getShortValue}, {@code getByteValue}), a number for {@code double}
 * ({@code getDoubleValue}), {@code true}/{@code false} for {@code boolean}, a string for {@code
 * string} ({@code getText}) — and whose other fields are skipped as Spark skips them; a repeated
 * field keeps its last value, as in Spark. Every other line (a type mismatch, a number in a
 * string column, a string in a number column, an overflow, malformed JSON, not an object) and
 * every line the byte parser might read differently from the character reader (not valid UTF-8,
 * a NUL byte, a byte order mark) goes through {@code from_json}'s own parser on the same text:
 * Spark's {@code JacksonParser} under a {@code FailureSafeParser}, over {@code
 * CreateJacksonParser.utf8String}, exactly as {@code JsonToStructsEvaluator} builds it. So a row
 * is always the row {@code from_json} gives, partial results and corrupt records included;
 * the one visible difference is that the corrupt record column of a line that is not valid UTF-8
 * holds its text with the malformed bytes replaced by U+FFFD (a Java UDF returns Java strings),
 * where {@code from_json} keeps the bytes.
 *
 * <p>Only the column types in {@link #KINDS} (bigint, int, smallint, tinyint, boolean, double,
 * string), without metadata (no column defaults), are accepted: the constructor refuses any
 * other schema, and the Python side then uses {@code from_json}. O(line length) per line.
 */
public final class JsonLineParser implements UDF1<byte[], Row> {
  private static final long serialVersionUID = 1L;
  /** The column types this class reads; their Java values are exact. */
  private static final DataType[] KINDS = {
    DataTypes.LongType,
    DataTypes.IntegerType,
    DataTypes.ShortType,
    DataTypes.ByteType,
    DataTypes.BooleanType,
    DataTypes.DoubleType,
    DataTypes.StringType,
  };
  private static final int LONG = 0;
  private static final int INT = 1;
  private static final int SHORT = 2;
  private static final int BYTE = 3;
  private static final int BOOLEAN = 4;
  private static final int DOUBLE = 5;

  private final String schemaJson;
  private final String corruptColumn;
  /** Per result column, its index in {@link #KINDS}. */
  private final int[] kinds;
  /** Schema field name (the corrupt column left out) to its result column. */
  private final HashMap<String, Integer> fieldIndex = new HashMap<>();
  private transient JsonFactory factory;
  private transient FailureSafeParser<UTF8String> fromJson;

  /**
   * @param schemaJson the result's schema (Spark's JSON form), {@code corruptColumn} included
   * @param corruptColumn the string column that receives a line that cannot be read
   * @throws IllegalArgumentException for a column of a type not in {@link #KINDS}, or with
   *     metadata (a column default)
   */
  public JsonLineParser(String schemaJson, String corruptColumn) {
    this.schemaJson = schemaJson;
    this.corruptColumn = corruptColumn;
    StructField[] fields = ((StructType) DataType.fromJson(schemaJson)).fields();
    kinds = new int[fields.length];
    for (int i = 0; i < fields.length; i++) {
      kinds[i] = kind(fields[i].dataType());
      if (kinds[i] < 0 || !fields[i].metadata().equals(Metadata.empty())) {
        throw new IllegalArgumentException("unsupported column " + fields[i].toDDL());
      }
      if (!fields[i].name().equals(corruptColumn)) {
        fieldIndex.put(fields[i].name(), i);
      }
    }
  }

  @Override
  public Row call(byte[] line) {
    if (line == null) {
      return null;
    }
    if (fromJson == null) {
      open();
    }
    Row row = readsAlike(line) ? plain(line) : null;
    if (row != null) {
      return row;
    }
    Iterator<InternalRow> rows = fromJson.parse(UTF8String.fromBytes(line));
    return rows.hasNext() ? toRow(rows.next()) : null;
  }

  /** Builds the parsers in the task, as {@code from_json}'s evaluator does. */
  private void open() {
    StructType schema = (StructType) DataType.fromJson(schemaJson);
    StructType fields = new StructType();
    for (StructField field : schema.fields()) {
      if (!field.name().equals(corruptColumn)) {
        fields = fields.add(field);
      }
    }
    Map<String, String> settings =
        new Map.Map2<>("mode", "PERMISSIVE", "columnNameOfCorruptRecord", corruptColumn);
    JSONOptions options = new JSONOptions(settings, "UTC", corruptColumn);
    JacksonParser parser =
        new JacksonParser(fields, options, false, JacksonParser.$lessinit$greater$default$4());
    factory = options.buildJsonFactory();
    fromJson =
        new FailureSafeParser<>(
            (UTF8String input) ->
                parser.parse(input, CreateJacksonParser::utf8String, (UTF8String same) -> same),
            PermissiveMode$.MODULE$,
            schema,
            corruptColumn);
  }

  /** The row of a plain line (see the class comment), or null to read it as from_json does. */
  private Row plain(byte[] line) {
    Object[] values = new Object[kinds.length];
    try (JsonParser parser = factory.createParser(line)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return null;
      }
      JsonToken token;
      while ((token = parser.nextToken()) != JsonToken.END_OBJECT) {
        if (token != JsonToken.FIELD_NAME) {
          return null;
        }
        Integer index = fieldIndex.get(parser.currentName());
        JsonToken value = parser.nextToken();
        if (index == null) {
          parser.skipChildren();
        } else if (value == JsonToken.VALUE_NULL) {
          values[index] = null;
        } else {
          Object read = read(parser, value, kinds[index]);
          if (read == null) {
            return null;
          }
          values[index] = read;
        }
      }
    } catch (IOException | RuntimeException notPlain) {
      return null;
    }
    return RowFactory.create(values);
  }

  /** The value Spark's converter reads from {@code value} in one call, or null if it is more. */
  private static Object read(JsonParser parser, JsonToken value, int kind) throws IOException {
    boolean integer = value == JsonToken.VALUE_NUMBER_INT;
    return switch (kind) {
      case LONG -> integer ? parser.getLongValue() : null;
      case INT -> integer ? parser.getIntValue() : null;
      case SHORT -> integer ? parser.getShortValue() : null;
      case BYTE -> integer ? parser.getByteValue() : null;
      case BOOLEAN ->
          value == JsonToken.VALUE_TRUE ? Boolean.TRUE
              : value == JsonToken.VALUE_FALSE ? Boolean.FALSE : null;
      case DOUBLE ->
          integer || value == JsonToken.VALUE_NUMBER_FLOAT ? parser.getDoubleValue() : null;
      default -> value == JsonToken.VALUE_STRING ? parser.getText() : null;
    };
  }

  /**
   * True when Jackson's byte parser reads {@code line} as the character reader reads it: valid
   * UTF-8 (checked only when a byte is not ASCII), no NUL byte (Jackson would take the line for
   * UTF-16 or UTF-32), no byte order mark (Jackson would skip it).
   */
  static boolean readsAlike(byte[] line) {
    boolean ascii = true;
    for (byte b : line) {
      if (b == 0) {
        return false;
      }
      if (b < 0) {
        ascii = false;
      }
    }
    if (ascii) {
      return true;
    }
    if (line.length >= 3
        && line[0] == (byte) 0xEF
        && line[1] == (byte) 0xBB
        && line[2] == (byte) 0xBF) {
      return false;
    }
    try {
      StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(line));
      return true;
    } catch (CharacterCodingException malformed) {
      return false;
    }
  }

  /** {@code from_json}'s row as a {@link Row} (Spark turns it back into the same values). */
  private Row toRow(InternalRow row) {
    Object[] values = new Object[kinds.length];
    for (int i = 0; i < kinds.length; i++) {
      if (row.isNullAt(i)) {
        continue;
      }
      values[i] =
          switch (kinds[i]) {
            case LONG -> row.getLong(i);
            case INT -> row.getInt(i);
            case SHORT -> row.getShort(i);
            case BYTE -> row.getByte(i);
            case BOOLEAN -> row.getBoolean(i);
            case DOUBLE -> row.getDouble(i);
            default -> row.getUTF8String(i).toString();
          };
    }
    return RowFactory.create(values);
  }

  /** The index of {@code type} in {@link #KINDS}, or -1. */
  private static int kind(DataType type) {
    for (int i = 0; i < KINDS.length; i++) {
      if (KINDS[i].equals(type)) {
        return i;
      }
    }
    return -1;
  }
}
