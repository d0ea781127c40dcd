package blocks

// activeCurrencies lists the active alphabetic codes of ISO 4217 (list one:
// currencies, funds and the X-codes), sorted, four bytes per entry. It
// includes the recent XCG, ZWG, SLE and VED, and leaves out codes withdrawn
// by 2026 (ANG, BGN, CUC, HRK, SLL, ZWL). Updating it is a one-line change.
const activeCurrencies = "" +
	"AED AFN ALL AMD AOA ARS AUD AWG AZN BAM BBD BDT BHD BIF BMD BND BOB BOV " +
	"BRL BSD BTN BWP BYN BZD CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUP " +
	"CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF " +
	"GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR " +
	"KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT " +
	"MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN " +
	"PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE " +
	"SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX " +
	"USD USN UYI UYU UYW UZS VED VES VND VUV WST XAF XAG XAU XBA XBB XBC XBD " +
	"XCD XCG XDR XOF XPD XPF XPT XSU XTS XUA XXX YER ZAR ZMW ZWG "

// isCurrency reports whether b is an active ISO 4217 code (binary search).
func isCurrency(b []byte) bool {
	if len(b) != 3 {
		return false
	}
	lo, hi := 0, len(activeCurrencies)/4
	for lo < hi {
		m := (lo + hi) / 2
		c := activeCurrencies[m*4 : m*4+3]
		switch {
		case string(b) == c:
			return true
		case string(b) < c:
			hi = m
		default:
			lo = m + 1
		}
	}
	return false
}
