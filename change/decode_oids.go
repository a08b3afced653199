package change

// Well-known type OIDs of PostgreSQL's built-in types (pg_type.oid, stable
// across versions), so no one writes the numbers by hand.
const (
	OIDBool        uint32 = 16
	OIDBytea       uint32 = 17
	OIDChar        uint32 = 18 // "char": one byte
	OIDName        uint32 = 19
	OIDInt8        uint32 = 20
	OIDInt2        uint32 = 21
	OIDInt2Vector  uint32 = 22
	OIDInt4        uint32 = 23
	OIDRegproc     uint32 = 24
	OIDText        uint32 = 25
	OIDOID         uint32 = 26
	OIDTID         uint32 = 27
	OIDXID         uint32 = 28
	OIDCID         uint32 = 29
	OIDOIDVector   uint32 = 30
	OIDJSON        uint32 = 114
	OIDXML         uint32 = 142
	OIDPoint       uint32 = 600
	OIDLseg        uint32 = 601
	OIDPath        uint32 = 602
	OIDBox         uint32 = 603
	OIDPolygon     uint32 = 604
	OIDLine        uint32 = 628
	OIDCIDR        uint32 = 650
	OIDFloat4      uint32 = 700
	OIDFloat8      uint32 = 701
	OIDUnknown     uint32 = 705
	OIDCircle      uint32 = 718
	OIDMacaddr8    uint32 = 774
	OIDMoney       uint32 = 790
	OIDMacaddr     uint32 = 829
	OIDInet        uint32 = 869
	OIDBPChar      uint32 = 1042 // char(n)
	OIDVarchar     uint32 = 1043
	OIDDate        uint32 = 1082
	OIDTime        uint32 = 1083
	OIDTimestamp   uint32 = 1114
	OIDTimestamptz uint32 = 1184
	OIDInterval    uint32 = 1186
	OIDTimetz      uint32 = 1266
	OIDBit         uint32 = 1560
	OIDVarbit      uint32 = 1562
	OIDNumeric     uint32 = 1700
	OIDRecord      uint32 = 2249
	OIDUUID        uint32 = 2950
	OIDPgLSN       uint32 = 3220
	OIDTSVector    uint32 = 3614
	OIDTSQuery     uint32 = 3615
	OIDJSONB       uint32 = 3802
	OIDJSONPath    uint32 = 4072
	OIDInt4Range   uint32 = 3904
	OIDNumRange    uint32 = 3906
	OIDTsRange     uint32 = 3908
	OIDTstzRange   uint32 = 3910
	OIDDateRange   uint32 = 3912
	OIDInt8Range   uint32 = 3926
	OIDXID8        uint32 = 5069

	OIDBoolArray        uint32 = 1000
	OIDByteaArray       uint32 = 1001
	OIDCharArray        uint32 = 1002
	OIDNameArray        uint32 = 1003
	OIDInt2Array        uint32 = 1005
	OIDInt4Array        uint32 = 1007
	OIDTextArray        uint32 = 1009
	OIDBPCharArray      uint32 = 1014
	OIDVarcharArray     uint32 = 1015
	OIDInt8Array        uint32 = 1016
	OIDFloat4Array      uint32 = 1021
	OIDFloat8Array      uint32 = 1022
	OIDOIDArray         uint32 = 1028
	OIDJSONArray        uint32 = 199
	OIDXMLArray         uint32 = 143
	OIDPointArray       uint32 = 1017
	OIDBoxArray         uint32 = 1020
	OIDCIDRArray        uint32 = 651
	OIDInetArray        uint32 = 1041
	OIDMoneyArray       uint32 = 791
	OIDMacaddrArray     uint32 = 1040
	OIDTimestampArray   uint32 = 1115
	OIDDateArray        uint32 = 1182
	OIDTimeArray        uint32 = 1183
	OIDTimestamptzArray uint32 = 1185
	OIDIntervalArray    uint32 = 1187
	OIDNumericArray     uint32 = 1231
	OIDTimetzArray      uint32 = 1270
	OIDBitArray         uint32 = 1561
	OIDVarbitArray      uint32 = 1563
	OIDRecordArray      uint32 = 2287
	OIDUUIDArray        uint32 = 2951
	OIDPgLSNArray       uint32 = 3221
	OIDJSONBArray       uint32 = 3807
	OIDInt4RangeArray   uint32 = 3905
	OIDNumRangeArray    uint32 = 3907
	OIDTsRangeArray     uint32 = 3909
	OIDTstzRangeArray   uint32 = 3911
	OIDDateRangeArray   uint32 = 3913
	OIDInt8RangeArray   uint32 = 3927
)

// builtinNames names the built-in base types Decode knows by OID.
var builtinNames = map[uint32]string{
	OIDBool: "bool", OIDBytea: "bytea", OIDChar: "char", OIDName: "name",
	OIDInt8: "int8", OIDInt2: "int2", OIDInt2Vector: "int2vector", OIDInt4: "int4",
	OIDRegproc: "regproc", OIDText: "text", OIDOID: "oid", OIDTID: "tid", OIDXID: "xid",
	OIDCID: "cid", OIDOIDVector: "oidvector", OIDJSON: "json", OIDXML: "xml",
	OIDPoint: "point", OIDLseg: "lseg", OIDPath: "path", OIDBox: "box", OIDPolygon: "polygon",
	OIDLine: "line", OIDCIDR: "cidr", OIDFloat4: "float4", OIDFloat8: "float8",
	OIDUnknown: "unknown", OIDCircle: "circle", OIDMacaddr8: "macaddr8", OIDMoney: "money",
	OIDMacaddr: "macaddr", OIDInet: "inet", OIDBPChar: "bpchar", OIDVarchar: "varchar",
	OIDDate: "date", OIDTime: "time", OIDTimestamp: "timestamp", OIDTimestamptz: "timestamptz",
	OIDInterval: "interval", OIDTimetz: "timetz", OIDBit: "bit", OIDVarbit: "varbit",
	OIDNumeric: "numeric", OIDRecord: "record", OIDUUID: "uuid", OIDPgLSN: "pg_lsn",
	OIDTSVector: "tsvector", OIDTSQuery: "tsquery", OIDJSONB: "jsonb", OIDJSONPath: "jsonpath",
	OIDInt4Range: "int4range", OIDNumRange: "numrange", OIDTsRange: "tsrange",
	OIDTstzRange: "tstzrange", OIDDateRange: "daterange", OIDInt8Range: "int8range",
	OIDXID8: "xid8",
}

// builtinArrays maps built-in array type OIDs to their element type.
var builtinArrays = map[uint32]uint32{
	OIDBoolArray: OIDBool, OIDByteaArray: OIDBytea, OIDCharArray: OIDChar,
	OIDNameArray: OIDName, OIDInt2Array: OIDInt2, OIDInt4Array: OIDInt4,
	OIDTextArray: OIDText, OIDBPCharArray: OIDBPChar, OIDVarcharArray: OIDVarchar,
	OIDInt8Array: OIDInt8, OIDFloat4Array: OIDFloat4, OIDFloat8Array: OIDFloat8,
	OIDOIDArray: OIDOID, OIDJSONArray: OIDJSON, OIDXMLArray: OIDXML,
	OIDPointArray: OIDPoint, OIDBoxArray: OIDBox, OIDCIDRArray: OIDCIDR,
	OIDInetArray: OIDInet, OIDMoneyArray: OIDMoney, OIDMacaddrArray: OIDMacaddr,
	OIDTimestampArray: OIDTimestamp, OIDDateArray: OIDDate, OIDTimeArray: OIDTime,
	OIDTimestamptzArray: OIDTimestamptz, OIDIntervalArray: OIDInterval,
	OIDNumericArray: OIDNumeric, OIDTimetzArray: OIDTimetz, OIDBitArray: OIDBit,
	OIDVarbitArray: OIDVarbit, OIDRecordArray: OIDRecord, OIDUUIDArray: OIDUUID,
	OIDPgLSNArray: OIDPgLSN, OIDJSONBArray: OIDJSONB, OIDInt4RangeArray: OIDInt4Range,
	OIDNumRangeArray: OIDNumRange, OIDTsRangeArray: OIDTsRange,
	OIDTstzRangeArray: OIDTstzRange, OIDDateRangeArray: OIDDateRange,
	OIDInt8RangeArray: OIDInt8Range,
}

// BuiltinType returns the Type of a built-in base or array type, known
// without the catalog.
func BuiltinType(oid uint32) (Type, bool) {
	if name, ok := builtinNames[oid]; ok {
		return Type{OID: oid, Schema: "pg_catalog", Name: name, Kind: KindBase}, true
	}
	if elem, ok := builtinArrays[oid]; ok {
		delim := byte(',')
		if elem == OIDBox {
			delim = ';'
		}
		return Type{OID: oid, Schema: "pg_catalog", Name: "_" + builtinNames[elem], Kind: KindArray, Elem: elem, Delim: delim}, true
	}
	return Type{}, false
}
